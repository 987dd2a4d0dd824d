"""The debugging playbook quotes only errors that the book's own pages produce when executed.

The playbook's entries are rendered from the catalog (`casebook/catalog.py`), the same data the
export doctor classifies with. Every entry that quotes an error message names the page that
reproduces it: the quoted text must appear in that page's executed output, so a PyTorch upgrade that
changes a message breaks this test instead of leaving the playbook (and the doctor) stale. Entries
for problems that raise no error link a labelled section of their page (Sphinx's `-n` fails the
build on a label that does not exist).

The built playbook must show each entry as a definition-list term whose definition links to that
page. A broken definition-list marker renders as a plain paragraph without a Sphinx warning, so this
is checked on the HTML.
"""

import functools
import html
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from booklayout import REPO_ROOT
from casebook import catalog, toc

PLAYBOOK = toc.source("debugging_playbook")
HTML_ROOT = REPO_ROOT / "_build" / "html"
QUOTED = [entry for entry in catalog.ENTRIES if entry.message]


def built_path(page: str) -> Path:
    """The built HTML file of a page given relative to the repository root."""
    return (HTML_ROOT / page).with_suffix(".html")


@functools.cache
def page_text(page: str) -> str:
    """The visible text of a built page, whitespace collapsed."""
    source = built_path(page).read_text(encoding="utf-8")
    text = html.unescape(re.sub(r"<[^>]+>", "", source))
    return re.sub(r"\s+", " ", text)


_PLAIN_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


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
    """Term text -> files its definitions link to, as the built playbook shows them. One message can
    head two entries (one message, two causes): the term then links both pages."""
    page = (html_root / PLAYBOOK.relative_to(REPO_ROOT)).with_suffix(".html")
    parser = _Definitions()
    parser.feed(page.read_text(encoding="utf-8"))
    terms: dict[str, list[Path]] = {}
    for text, links in parser.terms:
        # Sphinx's smart quotes print a title's apostrophe (TensorRT's) as a typographic one.
        term = re.sub(r"\s+", " ", "".join(text)).strip().translate(_PLAIN_QUOTES)
        terms.setdefault(term, []).extend(
            (page.parent / href.split("#")[0]).resolve() for href in links if href
        )
    return terms


def test_playbook_renders_every_group_of_the_catalog_under_its_heading():
    source = PLAYBOOK.read_text(encoding="utf-8")
    for group, heading in catalog.GROUPS.items():
        match = re.search(
            rf"^### {re.escape(heading)}\n(.*?)(?=^### |^## |\Z)", source, re.MULTILINE | re.DOTALL
        )
        assert match, f"the playbook has no heading '### {heading}'"
        assert f'playbook_group("{group}")' in match[1], (
            f"the section {heading!r} does not render group {group!r}"
        )


def test_quoted_messages_are_distinct():
    messages = [entry.message for entry in QUOTED]
    assert len(messages) >= 8
    assert len(set(messages)) == len(messages), "an error text is quoted twice in the catalog"


@pytest.mark.parametrize("entry", QUOTED, ids=lambda e: e.id)
def test_quoted_error_is_produced_by_the_linked_page(entry):
    assert re.sub(r"\s+", " ", entry.message) in page_text(entry.docname), (
        f"the catalog quotes {entry.message!r} for {entry.id}, but the executed page {entry.page} does not show it"
    )


@pytest.mark.parametrize("entry", QUOTED, ids=lambda e: e.id)
def test_entry_pattern_matches_the_message_it_quotes(entry):
    assert entry.regex.search(entry.message), f"{entry.id}: its pattern does not match its own quoted message"


@pytest.mark.parametrize("entry", catalog.ENTRIES, ids=lambda e: e.id)
def test_built_playbook_shows_the_entry_as_a_term_linking_its_page(entry):
    terms = built_playbook_terms(HTML_ROOT)
    term = entry.message or entry.title.replace("`", "")
    assert term in terms, f"the built playbook has no definition-list term {term!r}"
    assert built_path(entry.docname).resolve() in terms[term], (
        f"the built playbook's entry {term!r} does not link {entry.page}"
    )
