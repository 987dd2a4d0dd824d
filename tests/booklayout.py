"""Where the book's pages are: the repository root and the pages listed in `_toc.yml`."""

import re
from pathlib import Path

import yaml

from casebook import REPO_ROOT


def _toc_files(entry) -> list[str]:
    files = [entry["file"]] if "file" in entry else []
    for key in ("parts", "chapters", "sections"):
        for child in entry.get(key, []):
            files += _toc_files(child)
    return files


def toc_pages() -> list[str]:
    """Every page of the book, as paths without suffix relative to the repository root."""
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text())
    return [toc["root"], *_toc_files(toc)]


def page_source(page: str) -> Path:
    """The source file (.md or .ipynb) of a TOC page."""
    return next(REPO_ROOT.glob(f"{page}.*"))


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
