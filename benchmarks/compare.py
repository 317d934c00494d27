"""Time the same cases on two versions of the library, interleaved in one session.

Usage::

    git worktree add /tmp/before 74b3e03
    .venv/bin/python benchmarks/compare.py /tmp/before/src src     # before, after
    git worktree remove /tmp/before

Each round runs one fresh interpreter per source tree (so neither sees the other's modules),
the trees alternating; each prints the median wall time of 5 calls per case. Rounds alternate
because a shared machine drifts: compare the two trees within a round, not across rounds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROUNDS = 3

CASES = """
import sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
import token_dynamics
assert token_dynamics.__file__.startswith(sys.argv[1]), token_dynamics.__file__
from token_dynamics import attention as att
from token_dynamics import stochastic as sto

def median_wall(fn):
    fn()
    walls = []
    for _ in range(5):
        time.sleep(0.05)
        t0 = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
    return float(np.median(walls))

rng = np.random.default_rng(0)
cells = []
for name, n, d in [("softmax", 16384, 2), ("sigmoid", 16384, 2), ("hardmax", 16384, 2),
                   ("softmax", 4096, 16), ("softmax", 2048, 64)]:
    X = rng.standard_normal((n, d)) / np.sqrt(d)
    A = rng.standard_normal((d, d)) / np.sqrt(d)
    V = np.eye(d)
    field = {"softmax": att.Softmax(A, V), "sigmoid": att.Sigmoid(A, V, b=-1.0),
             "hardmax": att.Hardmax(A, V)}[name]
    cells.append(f"{name} n={n} d={d}: {median_wall(lambda: field.velocity(X)):.3f} s")
X0 = rng.standard_normal((4096, 16))
X0 /= np.linalg.norm(X0, axis=1, keepdims=True)
for m in (4096, 16384):
    if hasattr(sto, "MLPNoise"):  # the paper's model (trees from 4296197 on)
        model = sto.StochasticTransformer(sto.MLPNoise("relu", width=m))
    else:
        model = sto.StochasticTransformer(activation="relu", width=m)
    t = median_wall(lambda: sto.simulate(model, X0, T=0.01, L=1, rng=1))
    cells.append(f"layer N=4096 d=16 m={m}: {t:.3f} s")
print(" | ".join(cells), flush=True)
"""


def main(trees: list[str]) -> None:
    trees = [str(Path(tree).resolve()) for tree in trees]
    for r in range(ROUNDS):
        for tree in trees:
            print(f"round {r + 1}, {tree}: ", end="", flush=True)
            subprocess.run([sys.executable, "-c", CASES, tree], check=True)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1:])
