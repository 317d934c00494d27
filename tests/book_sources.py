"""The book's source scanners, importable by the tests: `book/_ext/traceability.py`, and the
prose of a page with the papers' numbered results in it."""

import importlib.util
import re
import sys

from .helpers import ROOT

_spec = importlib.util.spec_from_file_location("traceability", ROOT / "book/_ext/traceability.py")
traceability = importlib.util.module_from_spec(_spec)
sys.modules["traceability"] = traceability  # dataclasses look their module up there
_spec.loader.exec_module(traceability)


# --- the reader's text of a page, and the papers' numbered results in it -------------------------

#: A fence of MyST: backticks or colons, then a directive ``{name}`` or a code language, if any.
_FENCE = re.compile(r"^\s*(?P<fence>`{3,}|:{3,})\s*(?P<info>\S*)")
#: Directives whose body is code, not prose (a code cell keeps its YAML header: captions, alt).
_CODE_DIRECTIVES = ("{code-cell}", "{code-block}", "{code}", "{sourcecode}")


def prose(text: str) -> str:
    """The lines of the MyST page `text` that a reader reads as prose: everything but the bodies
    of code cells and code blocks, and with the YAML header of each code cell (its figure's
    caption and alt text) kept."""
    out: list[str] = []
    stack: list[tuple[str, bool]] = []  # open fences: (the fence, whether its body is code)
    header = None  # in a code cell: "next" before its first line, True inside its YAML header
    for line in text.splitlines():
        fence = _FENCE.match(line)
        if fence:
            mark, info = fence["fence"], fence["info"]
            top = stack[-1][0] if stack else ""
            if stack and not info and mark[0] == top[0] and len(mark) >= len(top):
                stack.pop()
                header = None
                continue
            if not stack or not stack[-1][1]:  # no fence opens inside code
                code = not info.startswith("{") or info.startswith(_CODE_DIRECTIVES)
                stack.append((mark, code))
                header = "next" if info.startswith("{code-cell}") else None
                continue
        if stack and stack[-1][1]:
            if header == "next":
                header = True if line.strip() == "---" else None
            elif header is True:
                if line.strip() == "---":
                    header = None
                else:
                    out.append(line)
            continue
        out.append(line)
    return "\n".join(out)


_KIND = (
    r"(?:Theorem|Proposition|Lemma|Corollary|Remark|Assumption|Definition|Example|Figure|Table"
    r"|Section)s?|Prop\.|Thm\.|Fig\.|Figs\."
)
_NUMBER = r"(?:(?:[A-Z]|\d+)(?:\.\d+)+|\d+)\b"  # 1.4, A.1, 2, 11
#: A numbered result, or a list of them: "Lemma 4.1", "Lemmas 2.6 and 2.7", "Figures 2–6".
MENTION = re.compile(rf"\b(?:{_KIND})\s+{_NUMBER}(?:\s*(?:,\s*and|,|and|–|-)\s*{_NUMBER})*(?:'s)?")
_NAME = r"[A-Z][\w'’]+(?:(?:–|-|\s+and\s+|,\s+)[A-Z][\w'’]+)*"
_YEAR = r"\d{4}[a-z]?"
_CITE = r"\{cite(?::\w+)?\}`[^`]*`"
#: A paper named: "Agazzi et al.", "Coghi and Flandoli (2016)", "Raimond (1999", or a citation.
_OWNER = re.compile(rf"{_NAME}\s+et\s+al\.|{_NAME},?\s+\(?{_YEAR}\b|{_CITE}")
#: The owner after the result: "Table 1 of Agazzi et al.", "Figure 1 in Coghi and Flandoli (2016)".
_OWNED_AFTER = re.compile(rf"{MENTION.pattern}\s+(?:of|in)\s+(?:{_OWNER.pattern})")
#: Where a sentence ends ("et al." and "Prop." do not end one), a table cell (a `|` between
#: spaces, not the `|x|` of a formula), a paragraph.
_SENTENCE_END = re.compile(
    r"(?<!\bal)(?<!\bProp)(?<!\bFig)(?<!\bFigs)(?<!\beq)[.!?]\s+(?=[A-Z*({$])"
    r"|(?<=\s)\|(?=\s)|\n\s*\n"
)


def unowned_numbers(text: str) -> list[str]:
    """Each numbered result ("Theorem 1.4", "Lemmas 2.6 and 2.7", "Figure 1") in the prose of the
    MyST page `text` that does not name the paper it belongs to, with some words around it.

    The book's own statements are never written by number: a page refers to them with
    ``{prf:ref}``, which the build numbers. So a number written out is a paper's, and the reader
    is told which paper's: its authors earlier in the same sentence ("Agazzi et al. (2026),
    Theorem 1.4", "as Agazzi et al. show in their Lemma 4.1"), or "of" and the authors just
    after it ("Table 1 of Agazzi et al."). A paragraph, a table cell or a heading is its own
    sentence; lines wrapped in the source are not.
    """
    found = []
    for sentence in _SENTENCE_END.split(prose(text)):
        flat = " ".join(sentence.split())
        owners = [m.start() for m in _OWNER.finditer(flat)]
        after = [m.span() for m in _OWNED_AFTER.finditer(flat)]
        for m in MENTION.finditer(flat):
            if not any(o < m.start() for o in owners) and not any(
                a <= m.start() and m.end() <= b for a, b in after
            ):
                found.append(flat[max(0, m.start() - 60) : m.end() + 20])
    return found
