"""scripts/stale_pages.py: only the pages that import a changed helper lose their cached outputs."""

import sys

import nbformat
import pytest
from jupyter_cache import get_cache
from jupyter_cache.base import CacheBundleIn

from booklayout import REPO_ROOT, page_source

sys.path.insert(0, str(REPO_ROOT / "scripts"))
import stale_pages  # noqa: E402


def test_a_page_depends_on_what_its_cells_import_transitively():
    modules = stale_pages.page_modules(page_source("graph_breaks"))
    assert {"casebook.logs", "casebook.parity", "casebook.inputs"} <= modules  # parity imports inputs
    assert "casebook.patches.detectron2" not in modules


def test_a_module_named_in_a_string_is_a_dependency():
    # tensorrt.coverage runs its worker as `python -m casebook.backends.tensorrt._dryrun_worker`.
    assert "casebook.backends.tensorrt._dryrun_worker" in stale_pages.closure(
        {"casebook.backends.tensorrt.coverage"}
    )


def test_a_page_with_invalid_code_is_named(tmp_path):
    page = tmp_path / "broken.md"
    header = page_source("graph_breaks").read_text().split("\n---\n")[0] + "\n---\n"
    page.write_text(header + "\n```{code-cell} ipython3\nif\n```\n")
    with pytest.raises(SystemExit, match="broken.md: a code cell is not valid Python"):
        stale_pages.page_modules(page)


def test_drop_cached_outputs_removes_only_the_named_pages(tmp_path):
    cache = get_cache(tmp_path / "cache")
    pages = [tmp_path / "a.md", tmp_path / "b.md"]
    for index, page in enumerate(pages):
        notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"x = {index}")])
        notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
        cache.cache_notebook_bundle(CacheBundleIn(notebook, str(page)), check_validity=False)
    assert stale_pages.drop_cached_outputs(cache, [pages[0]], dry_run=True) == [pages[0]]
    assert len(cache.list_cache_records()) == 2
    assert stale_pages.drop_cached_outputs(cache, [pages[0]]) == [pages[0]]
    assert [record.uri for record in cache.list_cache_records()] == [str(pages[1])]


def test_dropped_pages_are_touched_so_that_sphinx_reads_them_again(tmp_path):
    import os

    page = tmp_path / "a.md"
    page.write_text("# A\n")
    os.utime(page, (1_000_000, 1_000_000))
    stale_pages.mark_for_rereading([page])
    assert page.stat().st_mtime > 1_000_000
