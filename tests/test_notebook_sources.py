"""Notebooks are committed as MyST-markdown text (jupytext), never as .ipynb with outputs."""

import re

from booklayout import REPO_ROOT, page_source, toc_pages


def test_notebooks_are_committed_as_text_without_outputs():
    committed = [p for p in REPO_ROOT.rglob("*.ipynb") if not {".venv", "_build"} & set(p.parts)]
    assert not committed, f"notebooks must be MyST markdown (jupytext), not .ipynb: {committed}"
    for page in toc_pages():
        source = page_source(page)
        text = source.read_text(encoding="utf-8")
        if "```{code-cell}" in text:
            front_matter = text.split("\n---\n", 1)[0]
            assert text.startswith("---\n") and re.search(r"^jupytext:", front_matter, re.M), (
                f"{source} lacks the jupytext front matter"
            )


def test_the_introduction_links_every_page_of_the_table_of_contents():
    # The intro is where a reader picks a page: a page added to _toc.yml and not to the intro is
    # one they never hear of.
    intro = page_source(toc_pages()[0])
    targets = re.findall(r"\{doc\}`(?:[^`<]*<)?([^`>]+)>?`", intro.read_text())
    # A {doc} target starting with / is relative to the book's root, any other to the intro's folder.
    linked = {
        ((REPO_ROOT / t[1:]) if t.startswith("/") else (intro.parent / t))
        .resolve()
        .relative_to(REPO_ROOT)
        .as_posix()
        for t in targets
    }
    missing = [page for page in toc_pages()[1:] if page not in linked]
    assert not missing, f"{intro.relative_to(REPO_ROOT)} does not link {missing}: add a {{doc}} link to each"
