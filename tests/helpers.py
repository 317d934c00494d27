"""What several test modules share: random instances, dense reference formulas, the log-log
slope of a convergence study, and the two-page fixture book that the build tests compile.

Each reference here is written from the formula, independently of the library's kernels, so a
test that compares the library with it checks the library against the mathematics.
"""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from scipy.special import softmax

from token_dynamics.attention import (
    L2,
    Hardmax,
    Linear,
    MultiHead,
    Sigmoid,
    Sinkhorn,
    Softmax,
    Unnormalised,
)

ROOT = Path(__file__).resolve().parents[1]


def load_tool(name):
    """The script ``tools/<name>.py`` (the folder is not a package) imported as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- random instances ---------------------------------------------------------------------------


def random_params(rng, d, scale=1.0):
    """Attention parameters ``(A, V)`` with O(1) entries (``scale`` multiplies ``A``)."""
    A = scale * rng.standard_normal((d, d)) / np.sqrt(d)
    V = rng.standard_normal((d, d)) / np.sqrt(d)
    return A, V


def all_fields(rng, d):
    """One instance of every unmasked attention variant, with random O(1) parameters."""
    A, V = random_params(rng, d)
    Qb, Kb = rng.standard_normal((2, d + 1, d)) / np.sqrt(d)
    return {
        "softmax": Softmax(A, V, beta=1.5),
        "unnormalised": Unnormalised(A, V, beta=0.7),
        "hardmax": Hardmax(A, V),
        "l2": L2(Qb, Kb, V, s=2.0),
        "sinkhorn": Sinkhorn(A, V, eps=4.0, max_iter=20_000),
        "sigmoid": Sigmoid(A, V, b=-0.3),
        "linear": Linear(A, V),
        "multihead": MultiHead((Softmax(A, V), L2(Qb, Kb, V)), W=(V, np.eye(d))),
    }


def random_spd(rng, d, *, shift, scale=1.0):
    """A random symmetric positive definite ``(d, d)`` matrix, ``scale (M M^T / d + shift I)``
    with ``M`` standard normal: its smallest eigenvalue is at least ``scale * shift``."""
    M = rng.standard_normal((d, d))
    return scale * (M @ M.T / d + shift * np.eye(d))


# --- dense references -----------------------------------------------------------------------------


def dense_scores(X, A):
    """Scores ``S[i, j] = <A x_i, x_j>`` as one einsum (no blocking, no shift)."""
    return np.einsum("ik,jk->ij", X @ A.T, X)


def dense_softmax_velocity(X, A, V, beta=1.0, w=None, Y=None):
    """Softmax self-attention velocity of the queries ``Y`` (default ``X``) against the keys
    ``X`` with weights ``w`` (default uniform): ``V sum_j P_ij x_j``, ``P`` normalised over j."""
    Y = X if Y is None else Y
    n = X.shape[0]
    w = np.full(n, 1.0 / n) if w is None else w
    P = softmax(beta * np.einsum("ik,jk->ij", Y @ A.T, X) + np.log(w)[None, :], axis=1)
    return P @ X @ V.T


def loglog_slope(x, y):
    """Slope of the least-squares line through ``(log x, log y)``: the order ``p`` of a quantity
    that behaves like ``C x^p``."""
    return np.polyfit(np.log(x), np.log(y), 1)[0]


# --- the fixture book -----------------------------------------------------------------------------

JUPYTER_BOOK = Path(sys.executable).with_name("jupyter-book")
NOTEBOOK_HEADER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
    format_version: 0.13
    jupytext_version: 1.19.6
kernelspec:
  display_name: Python 3 (ipykernel)
  language: python
  name: python3
---
"""
GOOD_NOTEBOOK = (
    NOTEBOOK_HEADER + "# A notebook\n\n```{code-cell} ipython3\nx = 1 + 1\nprint(x)\n```\n"
)
TOC = "format: jb-book\nroot: book/intro\nchapters:\n  - file: book/nb\n  - file: book/api\n"
# one API page; the intro links a re-exported name by its short path (resolved to its home)
API_PAGE = "Geometry\n========\n\n.. api-module:: token_dynamics.geometry\n"
INTRO = "# Intro\n\nA fixture book; see {py:func}`token_dynamics.normalize`.\n"
# an exercise with a folded solution, whose text marks every place the solution reaches
EXERCISE = """
```{exercise} Two plus two
:label: fixture-ex

Compute two plus two.
```

````{solution} fixture-ex
:class: dropdown

The answer is SOLUTION-TEXT-4.
````
"""


def make_book(tmp_path: Path, overrides: dict[str, str]) -> Path:
    """A two-page book in `tmp_path` with the real `_config.yml`, extensions and assets;
    `overrides` maps a path to the text that replaces (or adds) that file."""
    shutil.copy(ROOT / "_config.yml", tmp_path / "_config.yml")
    shutil.copytree(ROOT / "book" / "_ext", tmp_path / "book" / "_ext")
    shutil.copy(ROOT / "book" / "references.bib", tmp_path / "book" / "references.bib")
    shutil.copytree(ROOT / "_assets", tmp_path / "_assets")
    (tmp_path / "tools").mkdir()  # the converter of the downloadable notebooks
    shutil.copy(ROOT / "tools" / "plain_notebook.py", tmp_path / "tools" / "plain_notebook.py")
    files = {
        "_toc.yml": TOC,
        "book/intro.md": INTRO,
        "book/nb.md": GOOD_NOTEBOOK,
        "book/api.rst": API_PAGE,
    }
    files.update(overrides)
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def build_book(book: Path, *options: str) -> subprocess.CompletedProcess:
    """`jupyter-book build` of `book` with the flags of `make book`, from clean (``--all``)."""
    return subprocess.run(
        [str(JUPYTER_BOOK), "build", str(book), "-W", "-n", "--keep-going", "--all", *options],
        capture_output=True,
        text=True,
        timeout=600,
    )


def student_config(book: Path) -> Path:
    """Write the student edition's configuration (`tools/student_config.py`) next to `book`'s
    and return its path."""
    printed = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "student_config.py")],
        capture_output=True,
        text=True,
        check=True,
    )
    config = book / "_config_student.yml"
    config.write_text(printed.stdout, encoding="utf-8")
    return config
