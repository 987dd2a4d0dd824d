"""Every executed page offers its notebook, with the build's outputs, in its download menu; and a
downloaded notebook runs outside the book, the way the README tells a reader to run it.

Two are run (a failure notebook and the shortest case study): each is copied out of the built site
into an empty folder and executed there with `jupyter nbconvert --execute` in the book's environment.
"""

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from test_browser import build_machine_paths

from booklayout import REPO_ROOT, code_cells, toc_pages

HTML_ROOT = REPO_ROOT / "_build" / "html"
EXECUTED = [page for page in toc_pages() if code_cells(page)]
# Run end to end outside the book: one failure notebook, and the case study that takes least time.
RUN_OUTSIDE = ["notebooks/pytree_outputs", "case_studies/detectron2_vitdet"]


def output_texts(notebook) -> list[str]:
    """Every text a notebook's outputs hold: streams, text and HTML data, tracebacks."""
    texts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            texts.append(output.get("text", ""))
            texts += [str(value) for key, value in output.get("data", {}).items() if key.startswith("text/")]
            texts += output.get("traceback", [])
    return texts


def downloaded(page: str) -> Path:
    return HTML_ROOT / "_sources" / f"{page}.ipynb"


@pytest.mark.parametrize("page", EXECUTED)
def test_an_executed_page_offers_its_notebook_with_outputs(page):
    html = (HTML_ROOT / f"{page}.html").read_text(encoding="utf-8")
    links = re.findall(r'href="([^"]*_sources/[^"]*\.ipynb)"', html)
    assert links, f"{page}.html has no .ipynb in its download menu (casebook.sphinx_notebooks)"
    assert (HTML_ROOT / page).parent.joinpath(links[0]).resolve() == downloaded(page).resolve(), links
    notebook = nbformat.read(downloaded(page), as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert len(code) == code_cells(page), (
        f"{page}: {len(code)} code cells in the notebook, {code_cells(page)} on the page"
    )
    assert any(cell.outputs for cell in code), f"{page}: the offered notebook has no outputs"
    shown = "\n".join(output_texts(notebook))
    # A path counts where it starts one ("/root/" inside "/opt/rh/gcc-toolset-13/root/usr" does not).
    leaked = [path for path in build_machine_paths() if re.search(rf"(?<![\w./-]){re.escape(path)}", shown)]
    assert not leaked, f"{page}: the offered notebook shows the build machine's paths {leaked}"


@pytest.mark.parametrize("page", RUN_OUTSIDE)
def test_a_downloaded_notebook_runs_outside_the_book(page, tmp_path):
    notebook = tmp_path / downloaded(page).name
    notebook.write_bytes(downloaded(page).read_bytes())
    jupyter = Path(sys.executable).with_name("jupyter")
    ran = subprocess.run(
        [jupyter, "nbconvert", "--to", "notebook", "--execute", notebook.name, "--output", "ran.ipynb"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert ran.returncode == 0, (
        f"{page}: the downloaded notebook failed outside the book:\n{ran.stderr[-3000:]}"
    )
    result = nbformat.read(tmp_path / "ran.ipynb", as_version=4)
    errors = [
        cell.source.splitlines()[0]
        for cell in result.cells
        if cell.cell_type == "code"
        and "raises-exception" not in cell.metadata.get("tags", [])
        and any(output.output_type == "error" for output in cell.outputs)
    ]
    assert not errors, f"{page}: cells raised outside the book: {errors}"
