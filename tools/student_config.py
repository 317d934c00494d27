"""Print the book configuration of the student edition: `_config.yml` with solutions removed.

Usage: ``python tools/student_config.py > _build/_config_student.yml`` and ``python
tools/student_config.py --toc > _build/_toc_student.yml`` (its table of contents); ``make book
EDITION=student`` does this (through ``tools/book_config.py``) and builds into
``_build/student/``, beside the full edition's ``_build/html``.

The student edition links to nothing that holds the solutions: no page sources or executed
notebooks to download (their Markdown holds every solution), no repository button, no Binder
launch (Binder would open the repository's sources), no link from the checks page into the
repository. Its pages are built with the tag ``student`` (``book/_ext/editions.py``), so that
the introduction speaks to students of what their edition offers (``{only} student``) and no
page promises solutions (``{only} not student``). The pages for the course staff
(``STAFF_PAGES``: the instructor's guide, which describes the answer keys and the autograder
and where the solutions live) are left out of its table of contents and its sources.
"""

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
#: Pages for the course staff only: in the full edition, not in the student one.
STAFF_PAGES = ("book/instructor",)


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
    config["exclude_patterns"] = [*config.get("exclude_patterns", [])] + [
        f"{page}.md" for page in STAFF_PAGES
    ]
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


def student_toc(toc: dict) -> dict:
    """`toc` (a `_toc.yml`) without the entries of ``STAFF_PAGES``. In place."""

    def keep(entries: list) -> list:
        kept = [entry for entry in entries if entry.get("file") not in STAFF_PAGES]
        for entry in kept:
            for key in ("parts", "chapters", "sections"):
                if key in entry:
                    entry[key] = keep(entry[key])
                    if not entry[key]:  # a chapter whose only section was left out
                        del entry[key]
        return kept

    for key in ("parts", "chapters"):
        if key in toc:
            toc[key] = keep(toc[key])
    return toc


if __name__ == "__main__" and sys.argv[1:] == ["--toc"]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    yaml.safe_dump(student_toc(toc), sys.stdout, sort_keys=False, allow_unicode=True)
elif __name__ == "__main__":
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    # Paths in a config file are read relative to that file: anchor them at the repository root.
    config["bibtex_bibfiles"] = [str(ROOT / f) for f in config["bibtex_bibfiles"]]
    local = config["sphinx"]["local_extensions"]
    config["sphinx"]["local_extensions"] = {name: str(ROOT / p) for name, p in local.items()}
    yaml.safe_dump(student_config(config), sys.stdout, sort_keys=False, allow_unicode=True)
