"""casebook.sphinx_notebooks: an executed page's notebook is offered from `_sources/`, with the build
machine's paths shown as on the page; a page that executed nothing offers none."""

import nbformat

from casebook.sphinx_notebooks import executed_notebook, offer_notebook, with_outputs


def test_the_executed_notebook_is_copied_beside_the_sources_with_paths_made_relative(tmp_path):
    outdir = tmp_path / "_build" / "html"
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "1/0", outputs=[nbformat.v4.new_output("stream", text="/x/y/site/a.py\n")]
            )
        ]
    )
    executed = executed_notebook(outdir, "notebooks/page")
    executed.parent.mkdir(parents=True)
    nbformat.write(notebook, executed)
    offered = offer_notebook(outdir, "notebooks/page", [("/x/y/site", "site-packages")])
    assert offered == "notebooks/page.ipynb"
    copy = nbformat.read(outdir / "_sources" / offered, as_version=4)
    assert copy.cells[0].outputs[0].text == "site-packages/a.py\n"


def test_a_page_without_an_executed_notebook_offers_none(tmp_path):
    assert offer_notebook(tmp_path / "_build" / "html", "book/reference/glossary", []) is None
    assert not (tmp_path / "_build" / "html" / "_sources").exists()


def test_a_notebook_without_outputs_takes_them_from_the_execution_cache(tmp_path):
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    executed = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("print(6 * 7)", outputs=[nbformat.v4.new_output("stream", text="42\n")])
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )
    cache = get_cache(str(tmp_path / "cache"))
    cache.cache_notebook_bundle(
        CacheBundleIn(executed, "page.md"),
        check_validity=False,
    )
    bare = nbformat.from_dict(executed)
    bare.cells[0].outputs = []
    assert with_outputs(bare, tmp_path / "cache").cells[0].outputs[0].text == "42\n"
    other = nbformat.from_dict(bare)
    other.cells[0].source = "print(7 * 6)"  # other code: no cached run of it
    assert with_outputs(other, tmp_path / "cache").cells[0].outputs == []
