"""Print the book configuration of the student edition: `_config.yml` with solutions removed.

Usage: ``python tools/student_config.py > _build/_config_student.yml``; the Makefile does this
for ``make book EDITION=student``.
"""

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
config["title"] += " (student edition)"
# Paths in a config file are read relative to that file: anchor them at the repository root.
config["bibtex_bibfiles"] = [str(ROOT / f) for f in config["bibtex_bibfiles"]]
local = config["sphinx"]["local_extensions"]
config["sphinx"]["local_extensions"] = {name: str(ROOT / path) for name, path in local.items()}
config["sphinx"]["config"]["hide_solutions"] = True
# The page sources (.md, executed .ipynb) hold the solutions' text: publish neither them nor the
# download and launch buttons that lead to them (Binder would open the sources too).
config["sphinx"]["config"]["html_copy_source"] = False
repository = config["repository"]
config["sphinx"]["config"]["html_theme_options"] = {
    "repository_url": repository["url"],
    "repository_branch": repository["branch"],
    "path_to_docs": repository["path_to_book"],
    "use_repository_button": True,
    "use_download_button": False,
    "home_page_in_toc": True,
}
yaml.safe_dump(config, sys.stdout, sort_keys=False, allow_unicode=True)
