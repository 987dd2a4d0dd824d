"""The book's table of contents (`_toc.yml`): its pages by name, and the part each belongs to.

Code names a page by its name, the file name without folder or suffix ("pytree_outputs"), and asks
this module where it lives ("notebooks/pytree_outputs"). Moving a page is then `git mv` and
`_toc.yml`: the catalog, the scripts and the tests follow. Page names are unique across the book.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

import yaml

from casebook import REPO_ROOT

# The parts of the table of contents that code tells apart, by their captions in `_toc.yml`.
FAILURES = "Export failures, reproduced and fixed"
CASE_STUDIES = "Case studies"
SHIPPING = "Shipping"
SUFFIXES = (".md", ".ipynb")


class TocError(LookupError):
    """A page or part the table of contents does not have, or a table of contents that breaks a rule."""


def page_name(docname: str) -> str:
    """A page's name, its docname without the folder: "notebooks/pytree_outputs" -> "pytree_outputs"."""
    return docname.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class TocPage:
    docname: str  # the path without suffix, relative to the book's folder: "notebooks/pytree_outputs"
    part: str | None  # the caption of its part; None for the root page

    @property
    def name(self) -> str:
        return page_name(self.docname)


def _entries(entry: dict, part: str | None) -> list[TocPage]:
    found = [TocPage(entry["file"], part)] if "file" in entry else []
    for key in ("parts", "chapters", "sections"):
        for child in entry.get(key, []):
            found += _entries(child, child.get("caption", part) if key == "parts" else part)
    return found


def pages(root: Path = REPO_ROOT) -> list[TocPage]:
    """Every page of the table of contents at `root`, in its order, the root page first."""
    path = Path(root) / "_toc.yml"
    if not path.is_file():
        raise TocError(f"no table of contents at {path}: give the folder that holds the book's _toc.yml")
    toc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if "root" not in toc:
        raise TocError(f"{path} has no `root:` page; Jupyter Book needs one (root: book/intro)")
    found = [TocPage(toc["root"], None), *_entries(toc, None)]
    by_name: dict[str, str] = {}
    for page in found:
        if page.name in by_name:
            raise TocError(
                f"{path}: {by_name[page.name]} and {page.docname} are both named {page.name!r}; "
                "the book finds pages by name, so rename one of them"
            )
        by_name[page.name] = page.docname
    return found


def docnames(root: Path = REPO_ROOT) -> list[str]:
    """Every page's docname ("notebooks/pytree_outputs"), in the order of the table of contents."""
    return [page.docname for page in pages(root)]


def docname(name: str, root: Path = REPO_ROOT) -> str:
    """Where the page called `name` lives: "pytree_outputs" -> "notebooks/pytree_outputs"."""
    by_name = {page.name: page.docname for page in pages(root)}
    if name not in by_name:
        close = difflib.get_close_matches(name, by_name, n=3)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise TocError(
            f"no page named {name!r} in {Path(root) / '_toc.yml'}: {hint}"
            "give a page's file name without folder or suffix, and list a new page in _toc.yml"
        )
    return by_name[name]


def source(page: str, root: Path = REPO_ROOT) -> Path:
    """The source file (.md or .ipynb) of a page given by name or by docname."""
    doc = docname(page_name(page), root)
    if "/" in page and page != doc:
        raise TocError(f"{page!r} is not where that page lives: _toc.yml has it at {doc!r}")
    return docname_source(doc, root)


def docname_source(doc: str, root: Path = REPO_ROOT) -> Path:
    """The file (.md or .ipynb) of the page _toc.yml lists as `doc`."""
    for suffix in SUFFIXES:
        path = Path(root) / f"{doc}{suffix}"
        if path.is_file():
            return path
    raise TocError(f"_toc.yml lists {doc!r}, but neither {doc}.md nor {doc}.ipynb exists in {root}")


def part(caption: str, root: Path = REPO_ROOT) -> list[str]:
    """The docnames of the pages in the part with this caption, in order."""
    found = pages(root)
    captions = list(dict.fromkeys(page.part for page in found if page.part))
    if caption not in captions:
        raise TocError(f"no part captioned {caption!r} in _toc.yml; its parts are: {'; '.join(captions)}")
    return [page.docname for page in found if page.part == caption]


# The folders that hold the book's pages. With `only_build_toc_files: true` (``_config.yml``), a page
# file there that `_toc.yml` does not list is neither built nor checked, and nothing else says so.
PAGE_FOLDERS = ("book", "notebooks", "case_studies")
# Files in those folders that are not pages, each with the reason (path relative to the book's folder).
NOT_PAGES: dict[str, str] = {}


def unlisted_pages(root: Path = REPO_ROOT, not_pages: dict[str, str] | None = None) -> list[str]:
    """Page files (.md, .ipynb) under `PAGE_FOLDERS` that `_toc.yml` does not list and `NOT_PAGES`
    does not explain, as paths relative to `root`."""
    root = Path(root)
    listed = set(docnames(root))
    explained = NOT_PAGES if not_pages is None else not_pages
    found = []
    for folder in PAGE_FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            relative = path.relative_to(root).as_posix()
            if path.suffix not in SUFFIXES or "_build" in path.parts or ".ipynb_checkpoints" in path.parts:
                continue
            if relative.removesuffix(path.suffix) not in listed and relative not in explained:
                found.append(relative)
    return found


def unlisted_pages_message(unlisted: list[str]) -> str:
    return (
        f"{', '.join(unlisted)}: in a page folder but not in _toc.yml, so the book neither builds nor "
        "checks it. Add it to _toc.yml under its part, or, if it is not a page, to NOT_PAGES in "
        "casebook/toc.py with the reason."
    )
