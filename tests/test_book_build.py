"""The book build fails loudly: a tiny fixture book with one defect per case must not build;
and the student edition of a fixture with an exercise publishes no trace of its solution.

Each case copies the real `_config.yml` (and what it points to) next to a two-page book with
one planted defect, runs the same `jupyter-book build` command as `make book`, and asserts a
non-zero exit with the defect named in the log. A clean fixture must build, so that the failing
cases fail for their defect and not for the set-up.
"""

from pathlib import Path

import pytest
import yaml

from .helpers import (
    EXERCISE,
    GOOD_NOTEBOOK,
    NOTEBOOK_HEADER,
    build_book,
    load_tool,
    make_book,
    student_config,
)

DEFECTS = {
    "failing cell": (
        {
            "book/nb.md": NOTEBOOK_HEADER
            + "# Broken\n\n```{code-cell} ipython3\nraise ValueError('boom')\n```\n"
        },
        "boom",
    ),
    "broken cross-reference": (
        {"book/intro.md": "# Intro\n\nSee {ref}`no-such-label`.\n"},
        "no-such-label",
    ),
    "unknown citation": (
        {"book/intro.md": "# Intro\n\nAs shown in {cite}`nobody2099`.\n"},
        "nobody2099",
    ),
    "broken API reference": (
        {"book/intro.md": "# Intro\n\nSee {py:func}`token_dynamics.no_such_function`.\n"},
        "token_dynamics.no_such_function",
    ),
    "page missing from the TOC": (
        {"book/orphan.md": "# Orphan\n\nNot listed in the table of contents.\n"},
        "toctree",
    ),
}


@pytest.mark.slow
def test_clean_fixture_builds(tmp_path):
    result = build_book(make_book(tmp_path, {}))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    intro = (tmp_path / "_build" / "html" / "book" / "intro.html").read_text(encoding="utf-8")
    assert 'href="api.html#token_dynamics.geometry.normalize"' in intro


@pytest.mark.slow
@pytest.mark.parametrize("defect", list(DEFECTS))
def test_defect_fails_build(tmp_path, defect):
    overrides, needle = DEFECTS[defect]
    result = build_book(make_book(tmp_path, overrides))
    log = result.stdout + result.stderr
    assert result.returncode != 0, f"the build succeeded despite a {defect}:\n{log[-3000:]}"
    assert needle in log, f"the log does not name the {defect} ({needle!r}):\n{log[-3000:]}"


@pytest.mark.slow
def test_student_edition_publishes_no_solution(tmp_path):
    """`make book EDITION=student`: the exercise is there, its solution is nowhere in the site
    (neither on the page nor in page sources or executed notebooks offered for download)."""
    book = make_book(tmp_path, {"book/nb.md": GOOD_NOTEBOOK + EXERCISE})
    result = build_book(book, "--config", str(student_config(book)))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    site = book / "_build" / "html"
    assert "Compute two plus two" in (site / "book" / "nb.html").read_text(encoding="utf-8")
    leaks = [
        str(path.relative_to(site))
        for path in site.rglob("*")
        if path.is_file() and b"SOLUTION-TEXT-4" in path.read_bytes()
    ]
    assert not leaks, f"the solution is published in {leaks}"


def test_make_book_cache_follows_the_library(tmp_path, monkeypatch):
    """`make book`'s options (tools/book_config.py): the execution cache is keyed on the
    library's files, and a change of library or edition makes Sphinx re-read every page."""
    book_config = load_tool("book_config")
    library = tmp_path / "src" / "token_dynamics"
    library.mkdir(parents=True)
    (library / "a.py").write_text("x = 1\n", encoding="utf-8")
    build_dir = tmp_path / "_build"
    monkeypatch.setattr(book_config, "LIBRARY", library)
    monkeypatch.setattr(book_config, "BUILD", build_dir)
    monkeypatch.setattr(book_config, "CACHES", build_dir / ".jupyter_cache")
    monkeypatch.setattr(book_config, "STATE", build_dir / ".book_state")

    def options():
        return book_config.main(["--edition", "full"]).split()

    def cache_dirs():
        return sorted(p.name for p in (build_dir / ".jupyter_cache").glob("lib-*"))

    first = options()
    assert "--all" in first
    config = yaml.safe_load(Path(first[first.index("--config") + 1]).read_text(encoding="utf-8"))
    assert config["execute"]["execute_notebooks"] == "cache"
    cache = Path(config["execute"]["cache"])
    assert cache.name == f"lib-{book_config.library_fingerprint(library)}"
    assert Path(config["bibtex_bibfiles"][0]).is_absolute()
    cache.mkdir(parents=True)  # what the build does
    assert "--all" in options(), "no successful build recorded yet: read everything"
    book_config.main(["--edition", "full", "--built"])
    assert "--all" not in options(), "nothing changed: an incremental build"
    assert "--all" in book_config.main(["--edition", "student"]).split(), "edition changed"
    (library / "a.py").write_text("x = 2\n", encoding="utf-8")  # the library changes
    assert "--all" in options()
    assert cache_dirs() == [], "the cache of the old library is removed"
    (library / "b.py").write_text("", encoding="utf-8")
    before = book_config.library_fingerprint(library)
    (library / "b.py").rename(library / "c.py")  # a rename changes the fingerprint too
    assert book_config.library_fingerprint(library) != before


def test_student_edition_builds_beside_the_full_one(tmp_path, monkeypatch):
    """`make book EDITION=student`: built under _build/student (Jupyter Book's --path-output),
    then the site moved to _build/student/html and the executed notebooks (whose Markdown
    holds every solution) deleted; the full edition's _build/html is left alone."""
    book_config = load_tool("book_config")
    build_dir = tmp_path / "_build"
    monkeypatch.setattr(book_config, "BUILD", build_dir)
    monkeypatch.setattr(book_config, "CACHES", build_dir / ".jupyter_cache")
    monkeypatch.setattr(book_config, "STATE", build_dir / ".book_state")
    (build_dir / "html").mkdir(parents=True)
    (build_dir / "html" / "index.html").write_text("full", encoding="utf-8")

    options = book_config.main(["--edition", "student"]).split()
    assert options[options.index("--path-output") + 1] == str(build_dir / "student")
    built = build_dir / "student" / "_build"  # what jupyter-book writes there
    (built / "html").mkdir(parents=True)
    (built / "html" / "index.html").write_text("student", encoding="utf-8")
    (built / "jupyter_execute").mkdir()
    (built / "jupyter_execute" / "nb.ipynb").write_text("{}", encoding="utf-8")
    (build_dir / ".jupyter_cache" / f"lib-{book_config.library_fingerprint()}").mkdir(parents=True)
    book_config.main(["--edition", "student", "--built"])

    assert (build_dir / "student" / "html" / "index.html").read_text() == "student"
    assert not (built / "jupyter_execute").exists()
    assert (build_dir / "html" / "index.html").read_text() == "full"
    assert "--all" not in book_config.main(["--edition", "student"]).split()
    assert not (build_dir / "student" / "html").exists(), "a rebuild starts from no site"


@pytest.mark.slow
def test_notebooks_executed_beforehand_are_what_the_build_uses(tmp_path):
    """`book_config.py --execute` (make book, make build): the notebooks it executes into the
    cache are found there by the build, which executes none of them; a failing one is named and
    left out of the cache, for the build to execute and report."""
    book_config = load_tool("book_config")
    (tmp_path / "book").mkdir()
    book = make_book(tmp_path / "book", {})
    cache = tmp_path / "cache"
    summary = book_config.execute(cache, 2, paths=[book / "book" / "nb.md"])
    assert "1 of 1 notebooks executed" in summary, summary

    config = yaml.safe_load((book / "_config.yml").read_text(encoding="utf-8"))
    config["execute"].update(execute_notebooks="cache", cache=str(cache))
    cached = book / "_config_cached.yml"
    cached.write_text(yaml.safe_dump(config), encoding="utf-8")
    result = build_book(book, "--config", str(cached))
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    assert "Using cached notebook" in log and "Executing notebook" not in log, log[-3000:]

    broken = tmp_path / "broken.md"
    broken.write_text(DEFECTS["failing cell"][0]["book/nb.md"], encoding="utf-8")
    summary = book_config.execute(tmp_path / "cache2", 2, paths=[broken])
    assert "0 of 1 notebooks executed" in summary and "boom" in summary, summary
    assert "every notebook's run is in the cache" not in book_config.execute(
        tmp_path / "cache2", 1, paths=[broken]
    ), "a failed notebook was cached"
