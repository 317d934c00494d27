"""Print the `jupyter-book build` options of `make book`: cached execution keyed on the library.

Usage (what ``make book`` runs)::

    python tools/book_config.py [--edition full|student] > _build/book_options
    jupyter-book build . -W -n --keep-going $(cat _build/book_options)
    python tools/book_config.py [--edition ...] --built   # after a successful build only

jupyter-cache (``execute_notebooks: cache``) re-executes a notebook only when its code cells
change; it does not know that the notebooks import ``token_dynamics``. The cache therefore
lives in a folder named after a fingerprint of ``src/token_dynamics/`` (every file's path and
bytes): an edit of the library starts a new, empty cache (every notebook re-executes) and
removes the old one. ``--all`` is added when the library or the edition changed since the last
successful build (recorded by ``--built``), so that Sphinx re-reads the pages whose stored
outputs came from another library or edition.

CI (``make test``) does not use this: its ``build`` step executes every notebook from clean.
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


def edition_config(edition: str) -> dict:
    if edition == "student":
        printed = subprocess.run(
            [sys.executable, str(ROOT / "tools" / "student_config.py")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return yaml.safe_load(printed)  # already anchored
    return anchored(yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8")))


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edition", choices=("full", "student"), default="full")
    parser.add_argument("--built", action="store_true", help="record a successful build")
    args = parser.parse_args(argv)

    fingerprint = library_fingerprint()
    state = f"{args.edition} {fingerprint}"
    if args.built:
        STATE.write_text(state + "\n", encoding="utf-8")
        return ""
    cache = CACHES / f"lib-{fingerprint}"
    fresh = not cache.exists()
    for old in CACHES.glob("lib-*"):
        if old != cache:
            shutil.rmtree(old)
    config = edition_config(args.edition)
    config["execute"]["execute_notebooks"] = "cache"
    config["execute"]["cache"] = str(cache)
    BUILD.mkdir(exist_ok=True)
    path = BUILD / f"_config_{args.edition}.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8")

    previous = STATE.read_text(encoding="utf-8").strip() if STATE.exists() else ""
    options = ["--config", str(path)]
    if previous != state or fresh:
        options.append("--all")
    return " ".join(options)


if __name__ == "__main__":
    print(main())
