"""Sweep every public callable with every applicable corruption and say how the cases ended.

    PYTHONPATH=src .venv/bin/python tools/fuzz_report.py [--only NAME-SUBSTRING] [--show N]

Prints the number of public callables swept, the number of cases, the fraction that ended
cleanly under the failure policy of CONTRIBUTING.md (a finite result, a failure status, an
error naming an argument, or a FloatingPointError) and the cases that did not; then the same for
the sweep over scales and separations, whose answers are checked too (`tests.fuzz_api`).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fuzz_api import (
    CLEAN,
    SCALE_CLEAN,
    all_cases,
    public_callables,
    run_case,
    run_scale_case,
    scale_cases,
    scale_key,
)

KNOWN = Path(__file__).resolve().parents[1] / "tests" / "fuzz_known_defects.txt"
HEADER = (
    "# Fuzz cases that do not yet end cleanly (callable | argument | corruption), written by\n"
    "# `tools/fuzz_report.py --write-known`; tests/test_fuzz.py fails once one is fixed.\n"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="sweep only names containing this text")
    parser.add_argument(
        "--write-known",
        action="store_true",
        help="write the defects to tests/fuzz_known_defects.txt (the list the tests accept)",
    )
    parser.add_argument("--show", type=int, default=200, help="list at most this many defects")
    args = parser.parse_args()
    calls = {k: f for k, f in public_callables().items() if args.only in k}
    outcomes: Counter[str] = Counter()
    defects: list[str] = []
    keys: list[str] = []
    start = time.perf_counter()
    n_cases = 0
    for name, func in calls.items():
        for param, corruption in all_cases(name, func):
            outcome = run_case(name, func, param, corruption)
            n_cases += 1
            if outcome in CLEAN:
                outcomes[outcome] += 1
            else:
                outcomes["defect"] += 1
                keys.append(f"{name} | {param} | {corruption}")
                defects.append(f"{name}({param}: {corruption}) -> {outcome[:160]}")
    elapsed = time.perf_counter() - start
    # the sweep over scales and separations: answers compared with a second way to them
    scale_outcomes: Counter[str] = Counter()
    start = time.perf_counter()
    cases = [c for c in scale_cases() if args.only in scale_key(c)[0]]
    for case in cases:
        outcome = run_scale_case(case)
        if outcome in SCALE_CLEAN:
            scale_outcomes[outcome] += 1
        else:
            scale_outcomes["defect"] += 1
            keys.append(" | ".join(scale_key(case)))
            defects.append(f"{' | '.join(scale_key(case))} -> {outcome[:160]}")
    scale_elapsed = time.perf_counter() - start
    if args.write_known:
        KNOWN.write_text(HEADER + "".join(f"{k}\n" for k in keys))
    clean = n_cases - outcomes["defect"]
    scale_clean = len(cases) - scale_outcomes["defect"]
    for line in defects[: args.show]:
        print(line)
    print(f"public callables swept: {len(calls)}")
    print(f"cases: {n_cases} in {elapsed:.0f} s")
    for key in (*CLEAN, "defect"):
        print(f"  {key:20s} {outcomes[key]}")
    print(f"ended cleanly: {clean}/{n_cases} = {100 * clean / max(n_cases, 1):.2f} %")
    print(f"scales and separations: {len(cases)} cases in {scale_elapsed:.0f} s")
    for key in (*SCALE_CLEAN, "defect"):
        print(f"  {key:20s} {scale_outcomes[key]}")
    print(
        f"right answer or named refusal: {scale_clean}/{len(cases)} = "
        f"{100 * scale_clean / max(len(cases), 1):.2f} %"
    )
    return 0 if clean == n_cases and scale_clean == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())
