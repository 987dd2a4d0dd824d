"""The debugging playbook quotes only errors that the book's own pages produce when executed.

Each entry in the section "From error message to fix" of book/debugging_playbook.md is a definition
list item: the error text in backticks is the term, and labelled lines follow, the last one
"**Reproduced in** {doc}`page`". The quoted text must appear in that page's executed output, so a
PyTorch upgrade that changes a message breaks this test instead of leaving the playbook stale.

The built playbook must show each entry as a term whose definition links to that page. A broken
definition-list marker renders as a plain paragraph without a Sphinx warning, so this is checked on
the HTML.
"""

import functools
import html
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from booklayout import REPO_ROOT

PLAYBOOK = REPO_ROOT / "book" / "debugging_playbook.md"
HTML_ROOT = REPO_ROOT / "_build" / "html"
SECTION = "## From error message to fix"
# A term line holding one code span, then the definition lines (": ..." and indented), up to a blank line.
ENTRY = re.compile(r"^`(?P<error>[^`\n]+)`\n(?P<definition>: .*?)(?=\n\n|\Z)", re.MULTILINE | re.DOTALL)
LABELS = ("**Raised as**", "**Means**", "**Fix**", "**Reproduced in**")
REPRODUCED_IN = re.compile(r"\*\*Reproduced in\*\* \{doc\}`(?P<page>[^`]+)`")


def playbook_section() -> str:
    text = PLAYBOOK.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start)
    return text[start:] if end == -1 else text[start:end]


def playbook_entries() -> list[tuple[str, str]]:
    """(quoted error text, page that reproduces it) for every entry of the playbook."""
    section = playbook_section()
    entries = []
    for match in ENTRY.finditer(section):
        error, definition = match["error"], match["definition"]
        missing = [label for label in LABELS if label not in definition]
        assert not missing, f"the playbook entry {error!r} lacks {', '.join(missing)}"
        pages = REPRODUCED_IN.findall(definition)
        assert len(pages) == 1, f"the playbook entry {error!r} must link exactly one page, not {pages}"
        entries.append((error, pages[0]))
    assert entries, f"no entries found in the playbook section {SECTION!r}"
    definitions = len(re.findall(r"^: ", section, re.MULTILINE))
    labelled = section.count(LABELS[0])
    assert definitions == labelled == len(entries), (
        f"{len(entries)} entries, {definitions} definitions, {labelled} {LABELS[0]} lines: each entry"
        " must be a term line holding one code span, then ': ' and the labelled lines, then a blank line"
    )
    return entries


def built_path(page: str) -> Path:
    """The built HTML file of a page given as a {doc} target relative to book/."""
    target = (REPO_ROOT / "book" / page).resolve().relative_to(REPO_ROOT)
    return (HTML_ROOT / target).with_suffix(".html")


def page_text(page: str) -> str:
    """The visible text of a built page, whitespace collapsed."""
    source = built_path(page).read_text(encoding="utf-8")
    text = html.unescape(re.sub(r"<[^>]+>", "", source))
    return re.sub(r"\s+", " ", text)


class _Definitions(HTMLParser):
    """Every <dt> of a page: its text, and the links of the <dd> that follows it."""

    def __init__(self):
        super().__init__()
        self.terms: list[tuple[list[str], list[str]]] = []
        self._inside: str | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "dt":
            self.terms.append(([], []))
            self._inside = "dt"
        elif tag == "dd":
            self._inside = "dd"
        elif tag == "a" and self._inside == "dd" and self.terms:
            self.terms[-1][1].append(dict(attrs).get("href") or "")

    def handle_endtag(self, tag):
        if tag in ("dt", "dd"):
            self._inside = None

    def handle_data(self, data):
        if self._inside == "dt":
            self.terms[-1][0].append(data)


@functools.cache
def built_playbook_terms(html_root: Path) -> dict[str, list[Path]]:
    """Term text -> files its definition links to, as the built playbook shows them."""
    page = (html_root / PLAYBOOK.relative_to(REPO_ROOT)).with_suffix(".html")
    parser = _Definitions()
    parser.feed(page.read_text(encoding="utf-8"))
    return {
        re.sub(r"\s+", " ", "".join(text)).strip(): [
            (page.parent / href.split("#")[0]).resolve() for href in links if href
        ]
        for text, links in parser.terms
    }


def test_playbook_has_one_entry_per_failure_class():
    errors = [error for error, _ in playbook_entries()]
    assert len(errors) >= 8
    assert len(set(errors)) == len(errors), "an error text is quoted twice in the playbook"


@pytest.mark.parametrize(("error", "page"), playbook_entries())
def test_quoted_error_is_produced_by_the_linked_page(error, page):
    assert re.sub(r"\s+", " ", error) in page_text(page), (
        f"the playbook quotes {error!r}, but the executed page {page} does not show it"
    )


@pytest.mark.parametrize(("error", "page"), playbook_entries())
def test_built_playbook_shows_the_entry_as_a_term_linking_its_page(error, page):
    terms = built_playbook_terms(HTML_ROOT)
    assert error in terms, f"the built playbook has no definition-list term {error!r}"
    assert built_path(page).resolve() in terms[error], (
        f"the built playbook's entry {error!r} does not link {page}"
    )
