"""The computed parts of the instructor's guide (`book/_ext/course_guide.py`): every chapter's
learning goals are found, every notebook of the book has a measured execution time, and reading
times count prose, not code.
"""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXT = ROOT / "book" / "_ext"


def _load(name):
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXT / f"{name}.py")
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


traceability = _load("traceability")
_load("exercise_index")
course_guide = _load("course_guide")
CHAPTER_OF = traceability.chapters()
#: the numbered chapters: the pages of `_toc.yml` with sections under them (not the API's)
CHAPTERS = sorted({c for d, c in CHAPTER_OF.items() if c != d and not d.startswith("book/api")})
NOTEBOOKS = sorted(d for d, c in CHAPTER_OF.items() if c != d and not d.startswith("book/api"))


def test_every_chapter_states_learning_goals():
    assert len(CHAPTERS) >= 7
    for chapter in CHAPTERS:
        goals = course_guide.learning_goals(chapter).splitlines()
        numbered = [line for line in goals if line[:1].isdigit()]
        assert len(numbered) >= 4, (chapter, goals)
        assert all(f"{k}. " in line for k, line in enumerate(numbered, 1)), numbered


def test_every_notebook_has_a_measured_time():
    times = course_guide.measured_seconds()
    missing = [nb for nb in NOTEBOOKS if nb not in times]
    assert not missing, f"run `python coursework/build.py --time-notebooks` for {missing}"
    stale = sorted(set(times) - set(NOTEBOOKS))
    assert not stale, f"times of notebooks that are gone: {stale}"
    assert all(t > 0 for t in times.values()), times


def test_reading_time_counts_prose_only(tmp_path):
    (tmp_path / "book").mkdir()
    words = " ".join(["word"] * course_guide.WORDS_PER_MINUTE * 2)
    code = "```{code-cell} ipython3\n" + "x = 1\n" * 500 + "```\n"
    page = f"---\njupytext:\n  a: b\n---\n\n# Title\n\n{words}\n\n{code}"
    (tmp_path / "book" / "page.md").write_text(page, encoding="utf-8")
    # the words, plus the two of the heading
    minutes = course_guide.reading_minutes("book/page", tmp_path)
    assert minutes == (2 * course_guide.WORDS_PER_MINUTE + 2) / course_guide.WORDS_PER_MINUTE
