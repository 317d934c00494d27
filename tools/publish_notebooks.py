"""The plain notebooks that the launch buttons open: gathered, then published on a branch.

As QuantEcon publishes a notebooks repository beside each lecture site, the book publishes the
plain notebook of every notebook page (``tools/plain_notebook.py``: numbers, cross-references
and glued values as the site shows them, solutions folded, a first cell that installs the
library) on a branch of its own, which the site's Binder and Colab buttons open
(``book/_ext/book_site.py``). Two steps:

``python tools/publish_notebooks.py collect`` (``make notebooks``; ``make build`` too)
    Writes ``_build/notebooks/``: the downloads of the full edition's build
    (``_build/html/_sources/**/*.ipynb``) at their paths in the repository
    (``book/gaussian/cone.ipynb``), Binder's environment for them (``binder/``: the pins of the
    book's ``binder/requirements.txt`` without what opens the MyST sources, and the library
    from the repository at the commit built) and a README.

``python tools/publish_notebooks.py publish``
    Commits ``_build/notebooks/`` as the whole tree of the next commit of the branch
    ``launch_buttons.notebooks_branch`` of ``_config.yml`` (created without history the first
    time; no commit when nothing changed), with ``git commit-tree``: the work tree, the index
    and the checked-out branch are not touched. Nothing is pushed: ``git push origin
    notebooks`` publishes it, after the commit it names is pushed (Binder installs the library
    from there).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
OUT = ROOT / "_build" / "notebooks"
#: What Binder needs only to open the MyST sources as notebooks (``binder/postBuild``): the
#: plain notebooks are notebooks already.
SOURCES_ONLY = ("jupytext", "jupyterlab-myst")
#: The default branch of the published notebooks (``launch_buttons.notebooks_branch``).
BRANCH = "notebooks"


def launch_config(root: Path = ROOT) -> dict[str, str]:
    """Where the notebooks are published and what they come from, read from ``_config.yml``:
    ``repository`` (the book's), ``notebooks_repository`` (empty: the book's), ``branch`` (of
    the notebooks) and ``site`` (``html.baseurl``, possibly empty)."""
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    launch = config.get("launch_buttons") or {}
    repository = (config.get("repository") or {}).get("url", "").removesuffix("/")
    return {
        "repository": repository,
        "notebooks_repository": launch.get("notebooks_repository") or repository,
        "branch": launch.get("notebooks_branch") or BRANCH,
        "site": (config.get("html") or {}).get("baseurl", ""),
    }


def _requirement_name(line: str) -> str:
    """The normalised project name of a requirement line (``jupyterlab-myst==2.7.0``)."""
    name = re.match(r"[A-Za-z0-9._-]+", line.strip())
    return re.sub(r"[-_.]+", "-", name[0]).lower() if name else ""


def notebooks_requirements(text: str, library: str) -> str:
    """Binder's ``requirements.txt`` for the plain notebooks, from the book's (`text`).

    The book's header comment and the packages of :data:`SOURCES_ONLY` (with the comment lines
    just above each) are left out, and the editable install of the repository (``-e .``, absent
    from a notebooks branch) becomes the requirement `library`
    (``token-dynamics @ git+URL@commit``).

    Raises
    ------
    ValueError
        If `text` holds no ``-e .`` line: the library would be missing from Binder.
    """
    lines = text.splitlines()
    while lines and lines[0].startswith("#"):  # the book's header
        lines.pop(0)
    out, comments, found = [], [], False
    for line in lines:
        if line.startswith("#") or not line.strip():
            comments.append(line)
            continue
        if line.strip() == "-e .":
            out += ["# the library, at the commit the notebooks were built from", library]
            found = True
        elif _requirement_name(line) not in SOURCES_ONLY:
            out += [*comments, line]
        comments = []
    if not found:
        raise ValueError("`binder/requirements.txt` has no `-e .` line: add the library there")
    header = [
        "# Binder's environment of the plain notebooks (tools/publish_notebooks.py, from the",
        "# book's binder/requirements.txt): the library and what its notebooks import. No Jupyter",
        "# Book, Sphinx or myst-nb: the notebooks run without them.",
    ]
    return "\n".join(header + out) + "\n"


def _git(root: Path, *args: str, env: dict | None = None) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, env=env, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def source_commit(root: Path = ROOT) -> tuple[str, bool]:
    """The commit checked out in `root` and whether tracked files differ from it."""
    commit = _git(root, "rev-parse", "HEAD")
    dirty = bool(_git(root, "status", "--porcelain", "--untracked-files=no"))
    return commit, dirty


def collect(site: Path = SITE, out: Path = OUT, root: Path = ROOT) -> list[Path]:
    """Write the plain notebooks of the site built in `site` into `out` (emptied first), with
    Binder's environment and a README; return the notebooks' paths, relative to `out`.

    Raises
    ------
    FileNotFoundError
        If `site` holds no built full edition with its downloads (``make book``).
    """
    sources = site / "_sources"
    notebooks = sorted(p.relative_to(sources) for p in sources.rglob("*.ipynb"))
    if not (site / "index.html").exists() or not notebooks:
        raise FileNotFoundError(
            f"no built site with notebooks to download in `{site}`: run `make book` first"
        )
    config = launch_config(root)
    commit, dirty = source_commit(root)
    shutil.rmtree(out, ignore_errors=True)
    for path in notebooks:
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(sources / path, out / path)
    binder = out / "binder"
    binder.mkdir(parents=True)
    library = f"token-dynamics @ git+{config['repository']}@{commit}"
    requirements = (root / "binder" / "requirements.txt").read_text(encoding="utf-8")
    (binder / "requirements.txt").write_text(
        notebooks_requirements(requirements, library), encoding="utf-8"
    )
    shutil.copyfile(root / "binder" / "runtime.txt", binder / "runtime.txt")
    state = " with uncommitted changes" if dirty else ""
    listing = "\n".join(f"- `{p.as_posix()}`" for p in notebooks)
    (out / "README.md").write_text(
        f"""# Token dynamics: the book's notebooks

The plain Jupyter notebook of every notebook page of the book
({config["site"] or config["repository"]}), written by `make notebooks` in
{config["repository"]} (commit {commit}{state}) and published here by
`tools/publish_notebooks.py`. Do not edit them here: each is generated from its MyST source
(`.md`) there.

Open one from its page's launch button (Binder, Colab), or download it. Numbers,
cross-references and computed values read as on the site, each cross-reference links to its
place there, solutions are folded, and the first cell installs the library where it is
missing. `binder/` is Binder's environment for them: the library at that commit and what the
notebooks import, without Jupyter Book.

{listing}
""",
        encoding="utf-8",
    )
    return notebooks


def built_from(out: Path) -> str:
    """The commit the notebooks in `out` were built from, as ``collect`` recorded it: the
    library's pin in their Binder environment, and the README's word on uncommitted changes."""
    requirements, readme = out / "binder" / "requirements.txt", out / "README.md"
    text = requirements.read_text(encoding="utf-8") if requirements.exists() else ""
    pin = re.search(r"^token-dynamics @ \S+@(?P<commit>[0-9a-f]{7,40})$", text, re.MULTILINE)
    if pin is None:
        return "an unrecorded commit"
    dirty = readme.exists() and "with uncommitted changes" in readme.read_text(encoding="utf-8")
    return pin["commit"][:12] + (" with uncommitted changes" if dirty else "")


def publish(out: Path = OUT, root: Path = ROOT, branch: str | None = None) -> str | None:
    """Commit the folder `out` as the whole tree of the next commit of `branch` (default:
    ``launch_buttons.notebooks_branch``) in the repository `root`, without touching its work
    tree, index or checked-out branch; return the new commit, or None if the tree is
    unchanged. Nothing is pushed.

    Raises
    ------
    FileNotFoundError
        If `out` holds no notebooks (``make notebooks``).
    ValueError
        If `branch` is the branch checked out in `root`.
    """
    if not any(out.rglob("*.ipynb")):
        raise FileNotFoundError(f"no notebooks in `{out}`: run `make notebooks` first")
    branch = branch or launch_config(root)["branch"]
    if _git(root, "rev-parse", "--abbrev-ref", "HEAD") == branch:
        raise ValueError(f"`{branch}` is checked out in {root}: publish from another branch")
    parent = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        work = ["--work-tree", str(out.resolve())]
        _git(root, *work, "add", "--all", "--force", ".", env=env)
        tree = _git(root, "write-tree", env=env)
    if parent and _git(root, "rev-parse", f"{parent}^{{tree}}") == tree:
        return None
    message = f"Plain notebooks of {built_from(out)}: make notebooks"
    new = _git(root, "commit-tree", tree, *(["-p", parent] if parent else []), "-m", message)
    _git(root, "update-ref", f"refs/heads/{branch}", new, *([parent] if parent else []))
    return new


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    steps = parser.add_subparsers(dest="step", required=True)
    gather = steps.add_parser("collect", help="write _build/notebooks from the built site")
    gather.add_argument("--site", type=Path, default=SITE)
    gather.add_argument("--out", type=Path, default=OUT)
    commit = steps.add_parser("publish", help="commit _build/notebooks to the notebooks branch")
    commit.add_argument("--out", type=Path, default=OUT)
    commit.add_argument("--branch", default=None)
    args = parser.parse_args(argv)
    if args.step == "collect":
        found = collect(args.site, args.out)
        print(f"{len(found)} notebooks and binder/ in {args.out}")
    else:
        branch = args.branch or launch_config()["branch"]
        new = publish(args.out, branch=branch)
        if new is None:
            print(f"`{branch}` already holds these notebooks: nothing to commit")
        else:
            print(f"`{branch}` is now {new}: publish it with `git push origin {branch}`")


if __name__ == "__main__":
    sys.exit(main())
