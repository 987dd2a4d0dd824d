"""Sphinx extension: every executed page offers its notebook, with the build's outputs, as ``.ipynb``.

The pages are MyST text notebooks. myst-nb writes each one it reads to
``_build/jupyter_execute/<page>.ipynb``, but with outputs only when it executed the page itself: a
page whose outputs come from the execution cache (every page, since ``scripts/execute_pages.py`` runs
them before Sphinx) is written without them. This extension takes that notebook, merges in the
cached outputs (jupyter-cache matches it by its code, as myst-nb does), and writes it next to the
page's source in ``_sources/``. sphinx-book-theme puts a ".ipynb" entry in the page's download menu
only when a launch service (Binder, JupyterHub, Colab) is configured, and the book has none, so the
extension names the file for the theme itself. The build machine's paths in outputs are rewritten
as on the page (`casebook.sphinx_outputs`), so the file is what the reader saw.
"""

from __future__ import annotations

from pathlib import Path

from casebook.sphinx_outputs import path_replacements, relative_paths

OUTPUT_FOLDER = "jupyter_execute"  # myst-nb's folder of executed notebooks, beside the HTML folder


def executed_notebook(outdir: Path, pagename: str) -> Path:
    return Path(outdir).parent / OUTPUT_FOLDER / f"{pagename}.ipynb"


def with_outputs(notebook, cache_dir: Path | None):
    """`notebook` with its outputs: as it is when it has some (myst-nb executed it), else merged from
    the execution cache's run of the same code; as it is when the cache has no such run (a book
    built without executing)."""
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    if any(cell.outputs for cell in code) or cache_dir is None or not Path(cache_dir).is_dir():
        return notebook
    from jupyter_cache import get_cache

    try:
        _, merged = get_cache(str(cache_dir)).merge_match_into_notebook(notebook)
    except KeyError:  # jupyter-cache's way of saying "no cached run of this notebook"
        return notebook
    return merged


def offer_notebook(
    outdir: Path, pagename: str, replacements: list[tuple[str, str]], cache_dir: Path | None = None
) -> str | None:
    """Write the page's notebook, with its outputs, into ``_sources/``; its path there, or None for a
    page that is not a notebook."""
    import nbformat

    source = executed_notebook(outdir, pagename)
    if not source.is_file():
        return None
    notebook = with_outputs(nbformat.read(source, as_version=4), cache_dir)
    target = Path(outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(relative_paths(nbformat.writes(notebook), replacements), encoding="utf-8")
    return f"{pagename}.ipynb"


def _cache_dir(app) -> Path:
    """myst-nb's execution cache: ``nb_execution_cache_path``, by default beside the HTML folder."""
    configured = getattr(app.config, "nb_execution_cache_path", "")
    return Path(configured) if configured else Path(app.outdir).parent / ".jupyter_cache"


def _add_download(app, pagename, templatename, context, doctree) -> None:
    if doctree is None or app.builder.format != "html":
        return
    offered = offer_notebook(Path(app.outdir), pagename, path_replacements(Path(app.srcdir)), _cache_dir(app))
    if offered:
        context["ipynb_source"] = offered  # sphinx-book-theme's download menu reads this


def setup(app):
    # Before sphinx-book-theme builds the page's header buttons (priority 501).
    app.connect("html-page-context", _add_download, priority=450)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
