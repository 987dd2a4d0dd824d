"""The catalog is well-formed data: every entry names a page of the book, silent problems a labelled
section of it, and classification never guesses."""

import re

import pytest

from booklayout import page_source, toc_pages
from casebook import catalog, toc


@pytest.mark.parametrize("entry", catalog.ENTRIES, ids=lambda e: e.id)
def test_entry_names_a_page_of_the_book(entry):
    assert "/" not in entry.page, (
        f"{entry.id}: name the page ({entry.page.rsplit('/', 1)[-1]!r}), not its folder"
    )
    assert entry.docname in toc_pages(), f"{entry.id}: {entry.page} is not in _toc.yml"
    assert entry.title and entry.means and entry.fix


@pytest.mark.parametrize("entry", [e for e in catalog.ENTRIES if e.label], ids=lambda e: e.id)
def test_a_silent_problem_points_at_a_labelled_section_of_its_page(entry):
    source = page_source(entry.page).read_text(encoding="utf-8")
    assert f"({entry.label})=" in source, f"{entry.page} has no MyST label ({entry.label})="


def test_every_fix_names_an_api_or_a_step():
    for entry in catalog.ENTRIES:
        assert "`" in entry.fix, f"{entry.id}: the fix names no API: {entry.fix!r}"


def test_entries_are_grouped_and_every_group_is_used():
    used = {entry.group for entry in catalog.ENTRIES}
    assert used == set(catalog.GROUPS)


def test_classify_uses_type_message_and_stage():
    error = RuntimeError("Found <class 'x.Instances'> in output, which is not a known type. If this ...")
    assert catalog.classify(error, "export").id == "unflattenable-output"
    assert catalog.classify(error, "strict") is None  # the same text from strict export is another error
    assert catalog.classify(ValueError(str(error)), "export") is None  # wrong type: no guess
    assert catalog.classify(RuntimeError("something else"), "export") is None


def test_the_more_specific_entry_wins():
    cache = RuntimeError(
        "Found <class 'transformers.cache_utils.DynamicCache'> in output, which is not a known type."
    )
    assert catalog.classify(cache, "export").id == "cache-output"
    own = RuntimeError(
        "Found <class 'mymodel.outputs.ModelOutputCache'> in output, which is not a known type."
    )
    assert catalog.classify(own, "export").id == "unflattenable-output"  # a name ending in Cache is no proof
    from torch._dynamo.exc import UserError, UserErrorType

    size_one = UserError(
        UserErrorType.CONSTRAINT_VIOLATION,
        "Constraints violated (batch)! ... specialized it to be a constant (1)",
    )
    assert catalog.classify(size_one, "export").id == "size-one-specialized"
    shape_guard = AssertionError("Guard failed: images[0].size()[1] == 320")
    assert catalog.classify(shape_guard, "run").id == "static-dim-guard"
    assert (
        catalog.classify(AssertionError("Guard failed: score_threshold == 0.5"), "run").id
        == "baked-argument-guard"
    )


def test_bad_lookups_say_what_exists():
    with pytest.raises(ValueError, match="unknown stage 'exporting'; one of callable, eager, export"):
        catalog.classify(RuntimeError("x"), "exporting")
    with pytest.raises(KeyError, match="no catalog entry 'nope'; the ids are: data-dependent-guard"):
        catalog.entry("nope")
    with pytest.raises(ValueError, match="unknown playbook group 'misc'"):
        catalog.playbook_group("misc")


def test_an_entry_needs_a_message_or_a_label():
    with pytest.raises(ValueError, match="needs either a quoted message or a page label"):
        catalog.Entry(id="x", group="code", title="t", page="p", means="m", fix="f", stages=("export",))
    with pytest.raises(ValueError, match="unknown stage"):
        catalog.Entry(
            id="x", group="code", title="t", page="p", means="m", fix="f", stages=("compile",), message="m"
        )


def test_playbook_entry_is_a_definition_list_item():
    text = catalog.playbook_entry(catalog.entry("data-dependent-guard"))
    assert text.startswith("`Could not guard on data-dependent expression`\n: **Raised as** ")
    assert f"**Reproduced in** {{doc}}`/{toc.docname('data_dependent_guards')}`" in text
    silent = catalog.playbook_entry(catalog.entry("dynamic-dim-specialized"))
    assert silent.startswith("A dimension asked to be dynamic was made static\n: **Means** ")
    assert "{ref}`catalog-dynamic-dim-specialized`" in silent
    # Every line but the last ends with a hard line break, so the labels stay on lines of their own.
    assert all(line.endswith("\\") for line in text.splitlines()[1:-1])
    assert re.search(r"\*\*Doctor id\*\* `data-dependent-guard`$", text)
    with_backticks = catalog.playbook_entry(catalog.entry("non-module-callable"))
    assert with_backticks.startswith("`` to be an instance of `torch.nn.Module`, got <class 'method'> ``\n")


def test_exception_names_match_real_classes():
    """A renamed exception class in torch would silently stop matching: check the names resolve."""
    import importlib

    for entry in catalog.ENTRIES:
        for name in entry.exceptions:
            module, _, qualname = name.rpartition(".")
            owner = importlib.import_module(module) if module else __builtins__
            kind = getattr(owner, qualname) if module else eval(qualname)  # noqa: S307 - builtins only
            assert isinstance(kind, type) and issubclass(kind, BaseException), name


def missing_entries_message(pages: list[str]) -> str:
    return (
        f"{', '.join(pages)}: a failure notebook with no catalog entry. Add an Entry to ENTRIES in "
        "casebook/catalog.py for each problem the page shows (page= its name), and a reproduction "
        "to REPRODUCTIONS in tests/doctor_cases.py"
    )


def test_every_failure_notebook_has_a_catalog_entry():
    pages = catalog.failure_pages_without_entries()
    assert not pages, missing_entries_message(pages)


def test_a_failure_notebook_without_an_entry_is_named(tmp_path):
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nparts:\n  - caption: Export failures, reproduced and fixed\n"
        "    chapters:\n      - file: notebooks/data_dependent_guards\n      - file: notebooks/new_failure\n"
    )
    assert catalog.failure_pages_without_entries(tmp_path) == ["notebooks/new_failure"]
    assert "Add an Entry to ENTRIES in casebook/catalog.py" in missing_entries_message(
        ["notebooks/new_failure"]
    )
