"""The notebooks' conventions that a reader sees in every code cell: one way to import the
library (CONTRIBUTING.md, "Notebook")."""

import sys

import pytest

from .helpers import ROOT

sys.path.insert(0, str(ROOT / "tools"))
from notebook_code import code_cells, import_violations, notebooks

COURSEWORK = sorted(
    p
    for p in (ROOT / "coursework").glob("*.md")
    if p.read_text(encoding="utf-8").lstrip().startswith("---\njupytext:")
)


@pytest.mark.parametrize("path", notebooks() + COURSEWORK, ids=lambda p: str(p.relative_to(ROOT)))
def test_notebook_follows_the_import_convention(path):
    # the code of the whole page: the imports of its first cell serve the later ones
    code = "\n".join(code_cells(path))
    lines = code.splitlines()
    found = [
        f"{message}: {lines[int(message.split(':')[0].split()[1]) - 1].strip()}"
        for message in import_violations(code)
    ]
    assert not found, "\n".join(found)


def test_coursework_notebooks_found():
    assert COURSEWORK, "no jupytext notebooks under coursework/"


GOOD = """
import numpy as np
import token_dynamics as td
from token_dynamics import gaussian, plotting
from token_dynamics.book import glue
from token_dynamics.exercises import check_answer
X = td.uniform_sphere(4, 2, rng=0)
field = gaussian.SoftmaxMoments(np.eye(2), np.eye(2))
sol = gaussian.solve_moments(field, [0, 0], np.eye(2), [0, 1])
plotting.plot_tokens
"""


def test_the_convention_passes():
    assert import_violations(GOOD) == []


@pytest.mark.parametrize(
    ("source", "match"),
    [
        ("import token_dynamics", "import token_dynamics`"),
        ("import token_dynamics.plotting", "import token_dynamics.plotting`"),
        ("import token_dynamics as tdx", "as tdx"),
        ("from token_dynamics import gaussian as tg", "as tg"),
        ("from token_dynamics.attention import Softmax", "from token_dynamics.attention"),
        ("from token_dynamics import Softmax", "imports a name"),
        ("from token_dynamics.book import glue as g", "as g"),
        ("import token_dynamics as td\ntd.gaussian.solve_moments", "reaches a module"),
        ("import token_dynamics as td\ntd.solve_moments", "not exported"),
        ("from token_dynamics import attention\nattention.Softmax", "write `td.Softmax`"),
    ],
)
def test_other_forms_are_reported(source, match):
    found = import_violations(source)
    assert len(found) == 1 and match in found[0], found


def test_a_name_is_used_from_its_home_module(monkeypatch):
    # no package re-exports another's function today; plant one (meanfield showing
    # diagnostics.fit_power_law): a notebook must name its home
    from token_dynamics import diagnostics, meanfield

    monkeypatch.setattr(meanfield, "fit_power_law", diagnostics.fit_power_law, raising=False)
    source = "from token_dynamics import meanfield\nmeanfield.fit_power_law([1, 2], [1, 2])"
    (found,) = import_violations(source)
    assert "lives in `diagnostics`" in found


OLD_STYLE = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
---

# A page

```{code-cell} ipython3
import numpy as np

import token_dynamics
from token_dynamics import gaussian as tg
from token_dynamics.attention import Softmax
from token_dynamics.book import glue

field = Softmax(np.eye(2), np.eye(2))
path = tg.solve_moments(field, np.zeros(2), 0.1 * np.eye(2), [0.0, 0.1])
fit = token_dynamics.diagnostics.fit_power_law([1.0, 2.0], [1.0, 0.5])
```

Solve it with `tg.solve_moments`.
"""


def test_fix_imports_rewrites_a_page_to_the_convention(tmp_path):
    from notebook_code import fix_imports

    page = tmp_path / "page.md"
    page.write_text(OLD_STYLE, encoding="utf-8")
    assert fix_imports(page) == ["diagnostics", "gaussian"]
    text = page.read_text(encoding="utf-8")
    assert import_violations("\n".join(code_cells(page))) == []
    assert "import token_dynamics as td\nfrom token_dynamics import diagnostics, gaussian\n" in text
    assert "field = td.Softmax(np.eye(2), np.eye(2))" in text
    assert "path = gaussian.solve_moments(field," in text
    assert "fit = diagnostics.fit_power_law(" in text
    assert "Solve it with `gaussian.solve_moments`." in text
    exec("\n".join(code_cells(page)).replace("from token_dynamics.book import glue", ""), {})
