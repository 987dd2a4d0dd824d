"""The book's fail-on-error configuration really fails the build.

`execute.allow_errors: false` alone only *warns* on a raising cell in Jupyter Book 1, so a page could
show a traceback and the build still pass. These tests build a one-page fixture book with the
project's own `_config.yml` and the Makefile's own Jupyter Book flags (`make book BOOK=...`), and
check both sides: a raising cell fails the build, and the same cell tagged `raises-exception` builds.
"""

import subprocess
import textwrap

import pytest

from booklayout import fixture_book_config

NOTEBOOK_HEADER = textwrap.dedent(
    """\
    ---
    jupytext:
      text_representation:
        extension: .md
        format_name: myst
        format_version: 0.13
    kernelspec:
      display_name: Python 3
      language: python
      name: python3
    ---

    # Fixture page

    """
)

RAISING_CELL = textwrap.dedent(
    """\
    ```{{code-cell}} ipython3
    {tags}raise ValueError("planted failure 4821")
    ```
    """
)

ASSERTING_CELL = textwrap.dedent(
    """\
    ```{code-cell} ipython3
    assert 6 * 7 == 42
    ```
    """
)


def _build_fixture_book(repo_root, tmp_path, cells: str) -> subprocess.CompletedProcess:
    book = tmp_path / "book"
    fixture_book_config(book)
    (book / "_toc.yml").write_text("format: jb-book\nroot: page\n")
    (book / "page.md").write_text(NOTEBOOK_HEADER + cells)
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(repo_root), "book", f"BOOK={book}"],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_a_raising_cell_fails_the_build(repo_root, tmp_path):
    result = _build_fixture_book(repo_root, tmp_path, RAISING_CELL.format(tags="") + ASSERTING_CELL)
    output = result.stdout + result.stderr
    assert result.returncode != 0, "a notebook cell raised but the build succeeded:\n" + output[-3000:]
    assert "planted failure 4821" in output, "the build failed, but not because of the planted cell"


@pytest.mark.slow
def test_a_tagged_raising_cell_builds(repo_root, tmp_path):
    tagged = RAISING_CELL.format(tags=":tags: [raises-exception]\n\n")
    result = _build_fixture_book(repo_root, tmp_path, tagged + ASSERTING_CELL)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    page = (tmp_path / "book" / "_build" / "html" / "page.html").read_text()
    assert "planted failure 4821" in page, "the expected traceback is not shown on the page"
    # The page offers its executed notebook, the traceback included (casebook.sphinx_notebooks).
    assert 'href="_sources/page.ipynb"' in page, "the page's download menu has no .ipynb"
    offered = (tmp_path / "book" / "_build" / "html" / "_sources" / "page.ipynb").read_text()
    assert "planted failure 4821" in offered
