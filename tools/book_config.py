"""Print the `jupyter-book build` options of `make book`: cached execution keyed on the library.

Usage (what ``make book`` runs)::

    python tools/book_config.py [--edition full|student] > _build/book_options_full
    jupyter-book build . -W -n --keep-going $(cat _build/book_options_full)
    python tools/book_config.py [--edition ...] --built   # after a successful build only

jupyter-cache (``execute_notebooks: cache``) re-executes a notebook only when its code cells
change; it does not know that the notebooks import ``token_dynamics``. The cache therefore
lives in a folder named after a fingerprint of ``src/token_dynamics/`` (every file's path and
bytes): an edit of the library starts a new, empty cache (every notebook re-executes) and
removes the old one. ``--all`` is added when the library changed since the edition's last
successful build (recorded by ``--built``), so that Sphinx re-reads the pages whose stored
outputs came from another library. Both editions share the cache: a student build after a full
one executes nothing.

The student edition's table of contents is `_toc.yml` without the pages for the course staff
(``tools/student_config.py --toc``, written to ``_build/_toc_student.yml``).

The editions are built side by side, so that one server can serve both: the full one into
``_build/html``, the student one into ``_build/student/html`` (Jupyter Book builds it under
``_build/student/_build/``; ``--built`` moves the site up and deletes the executed notebooks it
left there, whose Markdown holds every solution).

``--ci`` (``make build``, in ``make test``): a fresh cache that the full edition's build fills
(every notebook executed from clean) and the student edition's build then reuses, and ``--all``.

``--execute JOBS`` (run by ``make book`` and ``make build`` after the options are printed, before
the build): executes the notebooks that the edition's cache holds no run of, ``JOBS`` at a time,
each in a fresh kernel in its own folder with the build's timeout per cell, and stores them in
the cache; the build then finds every one there. Jupyter Book executes one notebook at a time:
on CI's two cores this halves the time the build spends executing. A notebook that fails is left
out of the cache and named; the build executes it again and reports its error as usual.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "src" / "token_dynamics"
BUILD = ROOT / "_build"
CACHES = BUILD / ".jupyter_cache"
STATE = BUILD / ".book_state"
#: The student edition's own folder (Jupyter Book's --path-output), beside the full edition's.
STUDENT = "student"


def library_fingerprint(library: Path | None = None) -> str:
    """sha256 of the library's files (relative path and content), caches left out."""
    library = library or LIBRARY
    digest = hashlib.sha256()
    for path in sorted(p for p in library.rglob("*") if p.is_file()):
        if "__pycache__" in path.parts:
            continue
        digest.update(path.relative_to(library).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def anchored(config: dict) -> dict:
    """`config` with its file paths made absolute (a config file's paths are read relative to
    the file, and this one is written into _build/)."""
    config["bibtex_bibfiles"] = [str(ROOT / f) for f in config["bibtex_bibfiles"]]
    local = config["sphinx"]["local_extensions"]
    config["sphinx"]["local_extensions"] = {name: str(ROOT / path) for name, path in local.items()}
    return config


def _student_tool(*args: str) -> str:
    """What ``tools/student_config.py`` prints (its configuration, or with ``--toc`` its table
    of contents)."""
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / "student_config.py"), *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def edition_config(edition: str) -> dict:
    if edition == "student":
        return yaml.safe_load(_student_tool())  # already anchored
    return anchored(yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8")))


def site(edition: str) -> Path:
    """The folder of the edition's built site."""
    return BUILD / "html" if edition == "full" else BUILD / STUDENT / "html"


def _state(edition: str) -> Path:
    return STATE if edition == "full" else BUILD / STUDENT / ".book_state"


def finish(edition: str, fingerprint: str) -> None:
    """After a successful build: record it; move the student site up to its folder and delete
    the executed notebooks of the student build."""
    if edition == "student":
        built = BUILD / STUDENT / "_build"
        shutil.rmtree(site(edition), ignore_errors=True)
        (built / "html").rename(site(edition))
        shutil.rmtree(built / "jupyter_execute", ignore_errors=True)
    _state(edition).write_text(fingerprint + "\n", encoding="utf-8")


def execute(cache_path: Path, jobs: int, paths: list[Path] | None = None) -> str:
    """Execute into the cache at `cache_path`, `jobs` at a time, every notebook of the book (or
    of `paths`) it has no run of. Returns a summary; a failed notebook is named and left out of
    the cache (the build executes it again)."""
    from concurrent.futures import ProcessPoolExecutor

    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn
    from myst_nb.core.read import myst_nb_reader_plugin

    sys.path.insert(0, str(ROOT / "tools"))
    from notebook_code import CELL_TIMEOUT_S, notebooks, run_as_built

    cache = get_cache(str(cache_path))
    todo = []
    for path in paths if paths is not None else notebooks():
        try:
            cache.match_cache_notebook(myst_nb_reader_plugin(str(path)))
        except KeyError:
            todo.append(path)
    if not todo:
        return "every notebook's run is in the cache"
    lines, failed = [], []
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        runs = {path: pool.submit(run_as_built, path, CELL_TIMEOUT_S) for path in todo}
        for path, run in runs.items():
            nb, seconds, error = run.result()
            name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            if error is not None:
                failed.append(f"{name}:\n{error}")
                continue
            bundle = CacheBundleIn(nb, str(path), data={"execution_seconds": seconds})
            cache.cache_notebook_bundle(bundle, check_validity=False, overwrite=True)
            lines.append(f"{seconds:7.1f} s  {name}")
    lines.append(f"{len(todo) - len(failed)} of {len(todo)} notebooks executed, {jobs} at a time")
    if failed:
        lines.append("failed (the build executes them again and reports why):")
        lines += failed
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edition", choices=("full", "student"), default="full")
    parser.add_argument("--built", action="store_true", help="record a successful build")
    parser.add_argument("--ci", action="store_true", help="a fresh cache, every page re-read")
    parser.add_argument(
        "--execute",
        type=int,
        metavar="JOBS",
        help="execute the notebooks the cache lacks, JOBS at a time (after the options)",
    )
    args = parser.parse_args(argv)

    fingerprint = library_fingerprint()
    if args.built:
        finish(args.edition, fingerprint)
        return f"The {args.edition} edition is built: open {site(args.edition) / 'index.html'}"
    if args.execute is not None:
        return execute(CACHES / ("ci" if args.ci else f"lib-{fingerprint}"), args.execute)
    if args.ci:
        cache = CACHES / "ci"
        if args.edition == "full":  # every notebook executed from clean
            shutil.rmtree(cache, ignore_errors=True)
        fresh = True
    else:
        cache = CACHES / f"lib-{fingerprint}"
        fresh = not cache.exists()
        for old in CACHES.glob("lib-*"):
            if old != cache:
                shutil.rmtree(old)
    stale = [site(args.edition)]  # no page of an earlier build survives
    if args.edition == "student":
        stale.append(BUILD / STUDENT / "_build" / "html")
    for old in stale:
        shutil.rmtree(old, ignore_errors=True)
    config = edition_config(args.edition)
    config["execute"]["execute_notebooks"] = "cache"
    config["execute"]["cache"] = str(cache)
    BUILD.mkdir(exist_ok=True)
    path = BUILD / f"_config_{args.edition}.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8")

    state = _state(args.edition)
    previous = state.read_text(encoding="utf-8").strip() if state.exists() else ""
    options = ["--config", str(path)]
    if args.edition == "student":
        toc = BUILD / "_toc_student.yml"  # without the pages for the course staff
        toc.write_text(_student_tool("--toc"), encoding="utf-8")
        options += ["--toc", str(toc), "--path-output", str(BUILD / STUDENT)]
    if previous != fingerprint or fresh:
        options.append("--all")
    return " ".join(options)


if __name__ == "__main__":
    print(main())
