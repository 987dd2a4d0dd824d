"""Sphinx extension: each page loads each script once.

sphinx-thebe 0.3.1 adds its inline configuration script (``const THEBE_JS_URL = ...``) a second time
under Jupyter Book 1, and a ``const`` declared twice is a JavaScript error on every page. The book
does not use Thebe, but Jupyter Book always loads the extension, so the duplicate is dropped here,
when the page is rendered.
"""

from __future__ import annotations


def _script_key(script) -> tuple:
    # Sphinx stores an inline script's missing file as None or "" depending on who added it.
    filename = getattr(script, "filename", script) or ""
    attributes = getattr(script, "attributes", {})
    return (str(filename), tuple(sorted((k, str(v)) for k, v in attributes.items())))


def unique_scripts(scripts: list) -> list:
    """`scripts` in order, without repeats (same file or same inline body, same attributes)."""
    seen: set[tuple] = set()
    kept = []
    for script in scripts:
        key = _script_key(script)
        if key not in seen:
            seen.add(key)
            kept.append(script)
    return kept


def _drop_duplicate_scripts(app, pagename, templatename, context, doctree) -> None:
    if "script_files" in context:
        context["script_files"] = unique_scripts(context["script_files"])


def setup(app):
    app.connect("html-page-context", _drop_duplicate_scripts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
