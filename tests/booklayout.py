"""Where the book's pages are (through `casebook.toc`, which reads `_toc.yml`), and Markdown text
outside fenced blocks."""

import re
import shutil
from pathlib import Path

from casebook import REPO_ROOT, toc

__all__ = ["REPO_ROOT", "code_cells", "outside_fences", "page_source", "toc_pages"]


def toc_pages() -> list[str]:
    """Every page of the book, as docnames ("notebooks/pytree_outputs"), in the TOC's order."""
    return toc.docnames()


def page_source(page: str) -> Path:
    """The source file (.md or .ipynb) of a page, given by name or docname."""
    return toc.source(page)


def code_cells(page: str) -> int:
    """How many code cells a page has: 0 for a page that executes nothing."""
    return page_source(page).read_text(encoding="utf-8").count("```{code-cell}")


_FENCE = re.compile(r"(`{3,}|~{3,})")


def outside_fences(text: str) -> list[str]:
    """The lines of Markdown text outside fenced blocks (code cells, quoted output). A fence may be
    indented (inside a list item) and closes only on a bare line of at least as many of its
    characters, so a ```` block may hold ``` blocks."""
    kept, fence = [], None
    for line in text.splitlines():
        stripped = line.strip()
        if fence is None:
            opening = _FENCE.match(stripped)
            if opening:
                fence = opening.group(1)
            else:
                kept.append(line)
        elif set(stripped) == {fence[0]} and len(stripped) >= len(fence):
            fence = None
    return kept


def fixture_book_config(book: Path, config: str | None = None) -> None:
    """Give a fixture book at `book` the real book's configuration: `_config.yml` (or `config`, a
    changed copy of its text), its bibliography files and `_static/`. The earlier addresses that
    redirect are left out: they name pages a fixture book does not have."""
    import yaml

    settings = yaml.safe_load(config if config is not None else (REPO_ROOT / "_config.yml").read_text())
    settings["sphinx"]["config"].pop("earlier_addresses", None)
    book.mkdir(parents=True, exist_ok=True)
    (book / "_config.yml").write_text(yaml.safe_dump(settings, sort_keys=False))
    for bibfile in settings.get("bibtex_bibfiles", []):
        (book / bibfile).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / bibfile, book / bibfile)
    shutil.copytree(REPO_ROOT / "_static", book / "_static")  # the favicon and the book's CSS
