"""Every labelled statement has a test, and every statement marker names a statement."""

import re

from .book_sources import traceability


def test_every_statement_has_a_test():
    statements = traceability.collect()
    assert statements, "the book states nothing: the scan of book/ found no labelled statement"
    unchecked = [f"{s.label} ({s.docname})" for s in statements if not s.tests]
    assert not unchecked, f"statements with no test marked @pytest.mark.statement: {unchecked}"


def test_every_marker_names_a_statement():
    labels = {s.label for s in traceability.collect()}
    dangling = {
        label: tests for label, tests in traceability.test_markers().items() if label not in labels
    }
    assert not dangling, f"markers naming no statement of the book: {dangling}"


def test_scan_reads_both_fence_styles(tmp_path, monkeypatch):
    """The scanner is itself checked on a planted page, so that it cannot pass by seeing nothing."""
    book = tmp_path / "book"
    tests = tmp_path / "tests"
    book.mkdir()
    tests.mkdir()
    (book / "page.md").write_text(
        "```{prf:theorem} Backticks\n:label: t-one\n\nText.\n```\n\n"
        ":::{prf:lemma}\n:label: t-two\nText.\n:::\n\n"
        "```{prf:proof}\nNot a statement.\n```\n",
        encoding="utf-8",
    )
    (tests / "test_x.py").write_text(
        "import pytest\n\n@pytest.mark.statement('t-one')\ndef test_a():\n    pass\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(traceability, "ROOT", tmp_path)
    monkeypatch.setattr(traceability, "BOOK", book)
    monkeypatch.setattr(traceability, "TESTS", tests)
    found = {s.label: s for s in traceability.collect()}
    assert set(found) == {"t-one", "t-two"}
    assert found["t-one"].tests == ["tests/test_x.py::test_a"]
    assert found["t-two"].tests == []


def test_test_lines_point_at_the_tests():
    """The checks page links each test id to a line: that line defines the test."""
    sites = [site for found in traceability.test_sites().values() for site in found]
    assert sites
    for test, line in sites:
        path, _, name = test.partition("::")
        source = (traceability.ROOT / path).read_text(encoding="utf-8").splitlines()
        if name:
            assert re.match(rf"\s*(async\s+)?(def|class)\s+{name}\b", source[line - 1]), test
        else:
            assert line == 1, test


def test_source_url_points_at_the_line():
    url = traceability.source_url("https://example.org/o/r/", "main", "tests/test_a.py::t", 12)
    assert url == "https://example.org/o/r/blob/main/tests/test_a.py#L12"


def test_chapters_fold_sections_into_their_chapter(tmp_path):
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nparts:\n  - caption: P\n    chapters:\n"
        "      - file: a/theory\n        sections:\n          - file: a/x\n"
        "          - glob: a/api*\n      - file: b\n",
        encoding="utf-8",
    )
    found = traceability.chapters(tmp_path / "_toc.yml")
    assert found["a/x"] == "a/theory" and found["b"] == "b" and found["a/theory"] == "a/theory"
