"""tools/publish_notebooks.py: the plain notebooks gathered with Binder's environment, and
committed to their branch without touching the checkout."""

import importlib.util
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "publish_notebooks", ROOT / "tools" / "publish_notebooks.py"
)
publish_notebooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(publish_notebooks)

LIBRARY = "token-dynamics @ git+https://example.org/r@0123abc"


def requirement_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def test_binder_requirements_of_the_notebooks():
    book = (ROOT / "binder" / "requirements.txt").read_text(encoding="utf-8")
    plain = publish_notebooks.notebooks_requirements(book, LIBRARY)
    kept = [
        line
        for line in requirement_lines(book)
        if line != "-e ." and not line.startswith(publish_notebooks.SOURCES_ONLY)
    ]
    # every pin of the book's Binder but those that open the MyST sources, and the library
    assert requirement_lines(plain) == [*kept, LIBRARY]
    # nor the comments of those left out, which speak of the .md sources
    assert ".md" not in plain and "jupyterlab-myst" not in plain


def test_binder_requirements_need_the_library():
    with pytest.raises(ValueError, match=r"no `-e \.` line"):
        publish_notebooks.notebooks_requirements("numpy==2.4.6\n", LIBRARY)


def test_collect(tmp_path):
    site = tmp_path / "html"
    (site / "_sources" / "book" / "ch").mkdir(parents=True)
    (site / "index.html").write_text("<html></html>", encoding="utf-8")
    notebook = site / "_sources" / "book" / "ch" / "nb.ipynb"
    notebook.write_text('{"cells": []}\n', encoding="utf-8")
    (site / "_sources" / "book" / "ch" / "theory.md").write_text("# A page\n", encoding="utf-8")
    out = tmp_path / "notebooks"
    (out / "stale").mkdir(parents=True)  # emptied first

    found = publish_notebooks.collect(site, out)
    assert found == [Path("book/ch/nb.ipynb")]
    assert (out / "book" / "ch" / "nb.ipynb").read_bytes() == notebook.read_bytes()
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "README.md",
        "binder/requirements.txt",
        "binder/runtime.txt",
        "book/ch/nb.ipynb",
    ]
    requirements = (out / "binder" / "requirements.txt").read_text(encoding="utf-8")
    commit, _ = publish_notebooks.source_commit(ROOT)
    assert f"token-dynamics @ git+https://github.com/token-dynamics/token-dynamics@{commit}" in (
        requirements
    )
    assert "`book/ch/nb.ipynb`" in (out / "README.md").read_text(encoding="utf-8")


def test_collect_needs_a_built_site(tmp_path):
    with pytest.raises(FileNotFoundError, match="run `make book` first"):
        publish_notebooks.collect(tmp_path / "html", tmp_path / "notebooks")


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def clone(tmp_path, monkeypatch):
    """A repository with one commit on `main`, its own config, and a change in its work tree."""
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "Test")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "test@example.org")
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "_config.yml").write_text(
        "repository: {url: https://github.com/o/r}\nlaunch_buttons: {notebooks_branch: nbs}\n",
        encoding="utf-8",
    )
    (repo / "book.md").write_text("# A page\n", encoding="utf-8")
    git(repo, "add", ".")
    git(repo, "commit", "--quiet", "-m", "first")
    (repo / "book.md").write_text("# A page, edited\n", encoding="utf-8")
    return repo


def test_publish_commits_the_folder_alone(clone, tmp_path):
    out = tmp_path / "notebooks"
    (out / "book").mkdir(parents=True)
    (out / "book" / "nb.ipynb").write_text("{}\n", encoding="utf-8")
    (out / "README.md").write_text("# notebooks\n", encoding="utf-8")
    (out / "binder").mkdir()
    (out / "binder" / "requirements.txt").write_text(
        "numpy==2.4.6\ntoken-dynamics @ git+https://github.com/o/r@0123456789abcdef\n",
        encoding="utf-8",
    )
    before = [git(clone, "rev-parse", "HEAD"), git(clone, "status", "--porcelain")]

    first = publish_notebooks.publish(out, clone)
    assert git(clone, "rev-parse", "nbs") == first  # the branch of _config.yml
    assert git(clone, "ls-tree", "-r", "--name-only", first).split() == [
        "README.md",
        "binder/requirements.txt",
        "book/nb.ipynb",
    ]
    # the message names the commit built, as the Binder environment pins it
    assert git(clone, "log", "-1", "--format=%s", first) == (
        "Plain notebooks of 0123456789ab: make notebooks"
    )
    assert git(clone, "rev-list", "--count", first) == "1"  # no history of the book's
    assert git(clone, "show", f"{first}:book/nb.ipynb") == "{}"
    # HEAD, the index and the work tree (its uncommitted edit) as they were
    assert [git(clone, "rev-parse", "HEAD"), git(clone, "status", "--porcelain")] == before
    assert git(clone, "rev-parse", "--abbrev-ref", "HEAD") == "main"

    assert publish_notebooks.publish(out, clone) is None  # unchanged: no commit
    (out / "book" / "nb.ipynb").write_text('{"cells": []}\n', encoding="utf-8")
    second = publish_notebooks.publish(out, clone)
    assert git(clone, "rev-parse", f"{second}^") == first
    assert git(clone, "rev-parse", "nbs") == second


def test_publish_refuses_the_checked_out_branch(clone, tmp_path):
    out = tmp_path / "notebooks"
    out.mkdir()
    (out / "nb.ipynb").write_text("{}\n", encoding="utf-8")
    with pytest.raises(ValueError, match="`main` is checked out"):
        publish_notebooks.publish(out, clone, branch="main")
    with pytest.raises(FileNotFoundError, match="run `make notebooks` first"):
        publish_notebooks.publish(tmp_path / "empty", clone)
