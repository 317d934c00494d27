"""Every labelled statement has a test, and every statement marker names a statement."""

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
