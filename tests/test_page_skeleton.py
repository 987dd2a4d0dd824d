"""Every failure page and case study follows the house skeleton, with one convention for its marks.

The skeleton: reproduce the failure, read the error, fix it, prove the fix, then what to take away.
The marks: a heading for an attempt that does not work starts with ✗ (the page still runs it and
asserts how it fails); a heading for a fix that works starts with ✓. One mark per heading.
"""

import re

import pytest

from booklayout import outside_fences, page_source, toc_pages
from casebook import toc

# By page name. Tours show how something works; they reproduce no failure.
TOURS = {"export_ir_tour", "exported_program_to_engine"}
# Surveys take many models through the fixes their sibling pages reproduce, read and make: they prove.
SURVEYS = {"torchvision_detection_zoo": ("detection_zoo_patches",)}


SKELETON_PAGES = [
    page
    for page in [*toc.part(toc.FAILURES), *toc.part(toc.CASE_STUDIES)]
    if toc.page_name(page) not in TOURS and toc.page_name(page) not in SURVEYS
]
MARKS = ("✓", "✗")


def headings(page: str) -> list[tuple[int, str]]:
    """(level, text) of every Markdown heading of the page, in order (code cells hold comments)."""
    lines = outside_fences(page_source(page).read_text(encoding="utf-8"))
    return [
        (len(m.group(1)), m.group(2).strip()) for line in lines if (m := re.match(r"^(#{1,6}) (.*)$", line))
    ]


def first_index(titles: list[str], predicate) -> int | None:
    return next((i for i, title in enumerate(titles) if predicate(title)), None)


# Shipping pages walk one route to a deploy target: marks and takeaways, no failure skeleton.
SHIPPING_PAGES = toc.part(toc.SHIPPING)
TOUR_PAGES = [page for page in toc_pages() if toc.page_name(page) in TOURS]


@pytest.mark.parametrize(
    "page",
    [*toc.part(toc.FAILURES), *toc.part(toc.CASE_STUDIES), *SHIPPING_PAGES, *TOUR_PAGES],
)
def test_marks_lead_the_heading_one_per_heading(page):
    for _, title in headings(page):
        count = sum(title.count(mark) for mark in MARKS)
        if count:
            assert count == 1 and title.startswith(MARKS), (
                f"{page}: heading {title!r}: put one mark first, '✓ ...' for a fix that works or "
                "'✗ ...' for a dead end"
            )


@pytest.mark.parametrize("page", SKELETON_PAGES)
def test_page_follows_reproduce_read_fix_prove_takeaways(page):
    titles = [title for _, title in headings(page)]
    steps = {
        "a 'Reproduce' heading": first_index(titles, lambda t: t.startswith("Reproduce")),
        "a 'Read the error' heading": first_index(titles, lambda t: t.startswith("Read the error")),
        "a '✓ ...' fix heading": first_index(titles, lambda t: t.startswith("✓")),
        "a 'Prove' heading": first_index(titles, lambda t: t.startswith("Prove")),
    }
    missing = [step for step, index in steps.items() if index is None]
    assert not missing, f"{page} lacks {', '.join(missing)}"
    order = list(steps.values())
    assert order == sorted(order), f"{page}: the skeleton's steps are out of order: {steps}"
    level_two = [title for level, title in headings(page) if level == 2]
    assert level_two[-1] == "What to take away", f"{page} must end with '## What to take away'"


def test_tours_and_shipping_pages_end_with_takeaways_too():
    for page in [*TOUR_PAGES, *SHIPPING_PAGES]:
        level_two = [title for level, title in headings(page) if level == 2]
        assert level_two[-1] == "What to take away", page


@pytest.mark.parametrize("page", [toc.docname(survey) for survey in sorted(SURVEYS)])
def test_a_survey_proves_ends_with_takeaways_and_links_the_pages_with_its_failures(page):
    titles = [title for _, title in headings(page)]
    assert first_index(titles, lambda t: t.startswith("Prove")) is not None, f"{page} lacks a 'Prove' heading"
    level_two = [title for level, title in headings(page) if level == 2]
    assert level_two[-1] == "What to take away", f"{page} must end with '## What to take away'"
    source = page_source(page).read_text(encoding="utf-8")
    for sibling in SURVEYS[toc.page_name(page)]:
        assert toc.docname(sibling) in SKELETON_PAGES, sibling
        assert f"{{doc}}`{sibling}" in source, f"{page} does not link {sibling}"
