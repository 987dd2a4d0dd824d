"""Sphinx extension: every executed page offers its notebook, with the build's outputs, as ``.ipynb``.

The pages are MyST text notebooks. myst-nb writes each executed one, outputs included, to
``_build/jupyter_execute/<page>.ipynb``; sphinx-book-theme puts a ".ipynb" entry in the page's
download menu only when a launch service (Binder, JupyterHub, Colab) is configured, and the book has
none. This extension copies the executed notebook next to the page's source in ``_sources/`` and
names it for the theme, which then shows the entry. The build machine's paths in outputs are
rewritten as on the page (`casebook.sphinx_outputs`), so the file is what the reader saw.
"""

from __future__ import annotations

from pathlib import Path

from casebook.sphinx_outputs import path_replacements, relative_paths

OUTPUT_FOLDER = "jupyter_execute"  # myst-nb's folder of executed notebooks, beside the HTML folder


def executed_notebook(outdir: Path, pagename: str) -> Path:
    return Path(outdir).parent / OUTPUT_FOLDER / f"{pagename}.ipynb"


def offer_notebook(outdir: Path, pagename: str, replacements: list[tuple[str, str]]) -> str | None:
    """Copy the page's executed notebook into ``_sources/``; its path there, or None for a page that
    is not a notebook."""
    source = executed_notebook(outdir, pagename)
    if not source.is_file():
        return None
    target = Path(outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(relative_paths(source.read_text(encoding="utf-8"), replacements), encoding="utf-8")
    return f"{pagename}.ipynb"


def _add_download(app, pagename, templatename, context, doctree) -> None:
    if doctree is None or app.builder.format != "html":
        return
    offered = offer_notebook(Path(app.outdir), pagename, path_replacements(Path(app.srcdir)))
    if offered:
        context["ipynb_source"] = offered  # sphinx-book-theme's download menu reads this


def setup(app):
    # Before sphinx-book-theme builds the page's header buttons (priority 501).
    app.connect("html-page-context", _add_download, priority=450)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
