"""Print the book configuration of the student edition: `_config.yml` with solutions removed.

Usage: ``python tools/student_config.py > _build/_config_student.yml``; ``make book
EDITION=student`` does this (through ``tools/book_config.py``) and builds into
``_build/student/``, beside the full edition's ``_build/html``.

The student edition links to nothing that holds the solutions: no page sources or executed
notebooks to download (their Markdown holds every solution), no repository button, no Binder
launch (Binder would open the repository's sources), no link from the checks page into the
repository. Its pages are built with the tag ``student`` (``book/_ext/editions.py``), so that
the introduction speaks to students of what their edition offers (``{only} student``).
"""

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def student_config(config: dict) -> dict:
    """`config` (the full edition's, its paths anchored at the repository root) made the
    student edition's. In place."""
    config["title"] += " (student edition)"
    sphinx = config["sphinx"]["config"]
    sphinx["hide_solutions"] = True
    sphinx["html_copy_source"] = False  # no _sources/: the .md and .ipynb hold the solutions
    config["html"].update(
        use_repository_button=False, use_download_button=False, use_issues_button=False
    )
    config.pop("launch_buttons", None)
    config["html"].pop("baseurl", None)  # no canonical link to the full edition's pages
    # Replaces the theme options Jupyter Book would derive from `repository` and
    # `launch_buttons`: no repository URL (nor the checks page's links that read it), no
    # launch buttons, no download button.
    sphinx["html_theme_options"] = {
        "use_repository_button": False,
        "use_edit_page_button": False,
        "use_issues_button": False,
        "use_source_button": False,
        "use_download_button": False,
        "home_page_in_toc": True,
    }
    return config


if __name__ == "__main__":
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    # Paths in a config file are read relative to that file: anchor them at the repository root.
    config["bibtex_bibfiles"] = [str(ROOT / f) for f in config["bibtex_bibfiles"]]
    local = config["sphinx"]["local_extensions"]
    config["sphinx"]["local_extensions"] = {name: str(ROOT / p) for name, p in local.items()}
    yaml.safe_dump(student_config(config), sys.stdout, sort_keys=False, allow_unicode=True)
