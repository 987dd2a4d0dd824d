"""casebook.toc finds pages by name through _toc.yml; casebook.sphinx_redirects sends each earlier
address to the page of the same name. Each wrong input names what to change."""

import pytest

from casebook import toc
from casebook.sphinx_redirects import redirects

TOC = """\
format: jb-book
root: book/intro
parts:
  - caption: Failures
    chapters:
      - file: notebooks/pytree_outputs
      - file: notebooks/graph_breaks
  - caption: Case studies
    chapters:
      - file: case_studies/zoo
        sections:
          - file: case_studies/zoo_patches
"""


@pytest.fixture
def book(tmp_path):
    (tmp_path / "_toc.yml").write_text(TOC)
    for docname in ("book/intro", "notebooks/pytree_outputs", "notebooks/graph_breaks", "case_studies/zoo"):
        (tmp_path / f"{docname}.md").parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f"{docname}.md").write_text("# page\n")
    return tmp_path


def test_pages_come_in_toc_order_with_their_parts(book):
    assert [(page.docname, page.part) for page in toc.pages(book)] == [
        ("book/intro", None),
        ("notebooks/pytree_outputs", "Failures"),
        ("notebooks/graph_breaks", "Failures"),
        ("case_studies/zoo", "Case studies"),
        ("case_studies/zoo_patches", "Case studies"),  # a section belongs to its chapter's part
    ]
    assert toc.part("Failures", book) == ["notebooks/pytree_outputs", "notebooks/graph_breaks"]


def test_a_page_is_found_by_its_name(book):
    assert toc.docname("graph_breaks", book) == "notebooks/graph_breaks"
    assert toc.source("graph_breaks", book) == book / "notebooks" / "graph_breaks.md"
    assert toc.source("notebooks/graph_breaks", book) == book / "notebooks" / "graph_breaks.md"


def test_an_unknown_name_suggests_the_close_ones(book):
    with pytest.raises(toc.TocError, match="no page named 'graph_break' .*did you mean graph_breaks"):
        toc.docname("graph_break", book)


def test_a_docname_at_the_wrong_folder_says_where_the_page_is(book):
    with pytest.raises(toc.TocError, match="_toc.yml has it at 'notebooks/graph_breaks'"):
        toc.source("failures/graph_breaks", book)


def test_a_listed_page_without_a_file_is_named(book):
    with pytest.raises(toc.TocError, match=r"lists 'case_studies/zoo_patches', but neither .*\.md nor"):
        toc.source("zoo_patches", book)


def test_two_pages_with_one_name_are_refused(book):
    (book / "_toc.yml").write_text(TOC + "      - file: case_studies/graph_breaks\n")
    with pytest.raises(
        toc.TocError, match="notebooks/graph_breaks and case_studies/graph_breaks are both named"
    ):
        toc.pages(book)


def test_a_missing_toc_or_part_is_named(book, tmp_path):
    with pytest.raises(toc.TocError, match="no table of contents at"):
        toc.pages(tmp_path / "nowhere")
    with pytest.raises(
        toc.TocError, match="no part captioned 'Shipping'.*its parts are: Failures; Case studies"
    ):
        toc.part("Shipping", book)


def test_the_book_s_own_parts_exist():
    for caption in (toc.FAILURES, toc.CASE_STUDIES, toc.SHIPPING):
        assert toc.part(caption), caption


def test_an_earlier_address_redirects_to_the_page_of_that_name_wherever_it_is(book):
    found = redirects(["failures/graph_breaks", "intro", "book/zoo", "zoo"], book)
    assert found == {
        "failures/graph_breaks": "../notebooks/graph_breaks.html",
        "intro": "book/intro.html",
        "book/zoo": "../case_studies/zoo.html",
        "zoo": "case_studies/zoo.html",
    }


def test_an_earlier_address_that_is_a_page_now_or_names_no_page_is_refused(book):
    with pytest.raises(
        toc.TocError, match="'notebooks/graph_breaks' is listed in earlier_addresses but is a page"
    ):
        redirects(["notebooks/graph_breaks"], book)
    with pytest.raises(toc.TocError, match="no page named 'old_page'"):
        redirects(["failures/old_page"], book)


def test_every_page_file_of_the_book_is_in_the_toc_or_explained():
    unlisted = toc.unlisted_pages()
    assert not unlisted, toc.unlisted_pages_message(unlisted)
    for path, reason in toc.NOT_PAGES.items():
        assert (toc.REPO_ROOT / path).is_file() and reason, f"NOT_PAGES: {path} is gone, or has no reason"


def test_a_page_file_missing_from_the_toc_is_named_with_where_to_add_it(book):
    (book / "notebooks" / "new_failure.md").write_text("# a new failure page\n")
    (book / "book" / "notes.md").write_text("# not a page\n")
    assert toc.unlisted_pages(book, not_pages={"book/notes.md": "a maintainer's notes"}) == [
        "notebooks/new_failure.md"
    ]
    message = toc.unlisted_pages_message(["notebooks/new_failure.md"])
    assert "neither builds nor checks it. Add it to _toc.yml under its part" in message
    assert "to NOT_PAGES in casebook/toc.py with the reason" in message
