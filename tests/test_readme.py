"""README.md's library quickstart runs as written: the one Python block of its section "The
library", at most ten lines, executed as a script (matplotlib's Agg backend, no display).
"""

import re
from pathlib import Path

import matplotlib
import numpy as np

import token_dynamics as td

ROOT = Path(__file__).resolve().parents[1]


def quickstart() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("\n## The library\n") :]
    section = section[: section.index("\n## ", 1)]
    blocks = re.findall(r"^```python\n(.*?)^```$", section, flags=re.M | re.S)
    assert len(blocks) == 1, "the section holds one Python block"
    return blocks[0]


def test_the_quickstart_runs_as_written(capsys):
    code = quickstart()
    lines = [line for line in code.splitlines() if line.strip()]
    assert len(lines) <= 10, lines
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    namespace: dict = {}
    try:
        exec(compile(code, "README.md", "exec"), namespace)
        printed = capsys.readouterr().out
        traj, ax = namespace["traj"], namespace["ax"]
        # layer normalisation: every state on the unit circle, to rounding
        np.testing.assert_allclose(np.linalg.norm(traj.states, axis=-1), 1.0, rtol=0, atol=1e-12)
        # the printed count is the final cloud's, and attention has merged the 32 tokens
        count = int(printed.split()[0])
        assert count == td.cluster_count(traj.final, 1e-3) and 1 <= count < 32, printed
        # the helper drew one path per token on the explicit axes
        (paths,) = ax.collections[:1]
        assert len(paths.get_segments()) == 32
    finally:
        plt.close("all")
