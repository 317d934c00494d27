"""``benchmarks/gpu.py``, the prepared GPU check, runs its correctness step on the CPU devices.

It is run on a lent GPU machine only now and then; this keeps it from rotting in between. In
`make test-backends` (JAX and array-api-strict installed: without JAX the script's report
lacks its JAX device, and the test fails rather than skips), not in `make unit`.
"""

import json
import subprocess
import sys

from .helpers import ROOT


def test_the_gpu_script_checks_every_device_against_numpy(tmp_path):
    out = tmp_path / "gpu.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/gpu.py"), "--smoke", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    assert "jax-cpu" in report["devices"]
    rows = report["correctness"]
    # three checks (two velocities, one RK4 run) in two dtypes on every device
    assert len(rows) == 6 * len(report["devices"])
    assert all(r["ok"] for r in rows), [r for r in rows if not r["ok"]]
    if any(name.startswith("torch") for name in report["devices"]):
        # simulate on torch with given weights agrees with numpy, then both are timed
        stoch = report["stochastic"]
        assert stoch[0]["what"] == "given weights" and stoch[0]["ok"], stoch
        assert all("torch_s" in r for r in stoch[1:]), stoch
    else:
        assert "not run" in report["stochastic"]  # what is not run is said, not dropped
