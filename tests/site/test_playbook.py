"""The debugging playbook quotes only errors that the book's own pages produce when executed.

Each table row of book/debugging_playbook.md starts with the error text in backticks and ends with
a {doc} link to the page that reproduces it. The quoted text must appear in that page's executed
output, so a PyTorch upgrade that changes a message breaks this test instead of leaving the
playbook stale.
"""

import html
import re

import pytest

from booklayout import REPO_ROOT

PLAYBOOK = REPO_ROOT / "book" / "debugging_playbook.md"
HTML_ROOT = REPO_ROOT / "_build" / "html"
ROW = re.compile(r"^\| `(?P<error>[^`]+)` \|.*\{doc\}`(?P<page>[^`]+)` \|\s*$", re.MULTILINE)


def playbook_rows() -> list[tuple[str, str]]:
    rows = [(m["error"], m["page"]) for m in ROW.finditer(PLAYBOOK.read_text(encoding="utf-8"))]
    assert rows, "no rows found in the playbook table"
    return rows


def page_text(page: str) -> str:
    """The visible text of a built page, whitespace collapsed."""
    target = (REPO_ROOT / "book" / page).resolve().relative_to(REPO_ROOT)
    source = (HTML_ROOT / target).with_suffix(".html").read_text(encoding="utf-8")
    text = html.unescape(re.sub(r"<[^>]+>", "", source))
    return re.sub(r"\s+", " ", text)


def test_playbook_has_one_row_per_failure_class():
    assert len(playbook_rows()) >= 8


@pytest.mark.parametrize(("error", "page"), playbook_rows())
def test_quoted_error_is_produced_by_the_linked_page(error, page):
    assert re.sub(r"\s+", " ", error) in page_text(page), (
        f"the playbook quotes {error!r}, but the executed page {page} does not show it"
    )
