"""Checks on the built site (run by `make test` after `make build`).

Sphinx's `-W -n` already fails on unresolved references it knows about; these checks look at the
HTML a reader gets: every TOC page exists, no cell shows an unexpected error, every internal link
resolves, and every executed page carries its version stamp.
"""

from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml

from booklayout import REPO_ROOT, code_cells, toc_pages
from casebook import toc
from casebook.sphinx_redirects import CONFIG as EARLIER
from casebook.sphinx_redirects import redirects

HTML_ROOT = REPO_ROOT / "_build" / "html"
VERSIONS_MARKER = 'class="casebook-version-stamp"'


def built_pages() -> list[Path]:
    return sorted(
        p for p in HTML_ROOT.rglob("*.html") if "_static" not in p.parts and "_sources" not in p.parts
    )


class _PageParser(HTMLParser):
    """Collects links, element ids, and cells: their tags and whether they show a traceback."""

    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.cells: list[dict] = []
        self._depth = 0
        self._cell_depth: int | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self._depth += 1
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
        classes = (attrs.get("class") or "").split()
        if "cell" in classes and self._cell_depth is None:
            self._cell_depth = self._depth
            self.cells.append(
                {
                    "tags": {c.removeprefix("tag_") for c in classes if c.startswith("tag_")},
                    "traceback": False,
                }
            )
        if self._cell_depth is not None and "traceback" in classes:
            self.cells[-1]["traceback"] = True

    def handle_endtag(self, tag):
        if self._cell_depth == self._depth:
            self._cell_depth = None
        self._depth -= 1


def parse(page: Path) -> _PageParser:
    parser = _PageParser()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


@pytest.fixture(scope="module", autouse=True)
def _site_was_built():
    if not (HTML_ROOT / "index.html").exists():
        pytest.fail("the site is not built: run `make build` first (make test does this)")


@pytest.mark.parametrize("page", toc_pages())
def test_every_toc_page_was_built(page):
    assert (HTML_ROOT / f"{page}.html").is_file(), f"{page} is in _toc.yml but {page}.html was not built"


@pytest.mark.parametrize("page", toc_pages())
def test_no_unexpected_error_output(page):
    for cell in parse(HTML_ROOT / f"{page}.html").cells:
        if cell["traceback"]:
            assert "raises-exception" in cell["tags"], (
                f"{page}: a cell shows a traceback but is not tagged raises-exception"
            )


@pytest.mark.parametrize("page", toc_pages())
def test_executed_pages_show_their_versions(page):
    if not code_cells(page):
        return
    assert VERSIONS_MARKER in (HTML_ROOT / f"{page}.html").read_text(encoding="utf-8"), (
        f"{page} runs code but has no version stamp (casebook.page.setup_page())"
    )


def test_internal_links_resolve():
    ids_by_page = {}
    broken = []
    for page in built_pages():
        for href in parse(page).links:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or href.startswith(("mailto:", "javascript:")):
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(HTML_ROOT)} -> {href}")
                continue
            if parts.fragment and target.suffix == ".html":
                ids = ids_by_page.setdefault(target, parse(target).ids)
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{page.relative_to(HTML_ROOT)} -> {href} (no such anchor)")
    assert not broken, "broken internal links:\n" + "\n".join(broken)


def _redirects() -> dict[str, str]:
    """Every earlier address of a page (both earlier layouts), and the link its redirect holds."""
    config = yaml.safe_load((REPO_ROOT / "_config.yml").read_text(encoding="utf-8"))
    return redirects(config["sphinx"]["config"][EARLIER], REPO_ROOT)


@pytest.mark.parametrize(("old", "new"), sorted(_redirects().items()))
def test_a_moved_page_s_old_address_sends_the_reader_to_its_new_page(old, new):
    moved_from = HTML_ROOT / f"{old}.html"
    assert moved_from.is_file(), f"{old}.html was not written: is sphinx_reredirects in extra_extensions?"
    assert new in moved_from.read_text(encoding="utf-8"), f"{old}.html does not point at {new}"
    target = (moved_from.parent / new).resolve()
    assert target.is_file(), f"{old} redirects to {new}, which was not built"
    landed = str(target.relative_to(HTML_ROOT.resolve())).removesuffix(".html")
    assert landed in toc_pages() and toc.page_name(landed) == toc.page_name(old), (
        f"{old} redirects to {landed}, not to the page of the same name"
    )
