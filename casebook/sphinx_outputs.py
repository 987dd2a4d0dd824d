"""Sphinx extension: cell outputs on the site show paths relative to where they live, not where the
book was built.

Tracebacks, warnings, logs and FX graph comments print absolute paths (``/home/ci/.../.venv/lib/
python3.11/site-packages/torch/export/_trace.py``). On the site they are noise at best and a leak of
the build machine's layout at worst, and they arrive through stdout, stderr, exception text and HTML
alike, so they are rewritten once, when the executed outputs are put on the page:

    <site-packages>/torch/...   ->  site-packages/torch/...
    <standard library>/inspect.py  ->  python3.11/inspect.py
    <checkout>/casebook/...     ->  casebook/...

Only the rendered site changes: a notebook run by a reader still prints the reader's own paths.
"""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

from docutils import nodes

from casebook import REPO_ROOT


def path_replacements(repo_root: Path = REPO_ROOT) -> list[tuple[str, str]]:
    """(absolute prefix, shown instead), longest prefix first so the most specific one wins."""
    python = f"python{sys.version_info.major}.{sys.version_info.minor}"
    pairs = {
        sysconfig.get_paths()["purelib"]: "site-packages",
        sysconfig.get_paths()["platlib"]: "site-packages",
        sysconfig.get_paths()["stdlib"]: python,
        str(repo_root): ".",
        sys.prefix: "PREFIX",
        sys.base_prefix: "PREFIX",
    }
    return sorted(((prefix.rstrip("/"), shown) for prefix, shown in pairs.items()), key=lambda p: -len(p[0]))


def relative_paths(text: str, replacements: list[tuple[str, str]]) -> str:
    """`text` with every absolute prefix of `replacements` replaced (``./x`` shown as ``x``)."""
    for prefix, shown in replacements:
        text = text.replace(prefix + "/", "" if shown == "." else shown + "/").replace(prefix, shown)
    return text


def _rewrite_outputs(app, doctree: nodes.document) -> None:
    replacements = app.env.casebook_path_replacements
    for block in list(doctree.findall(lambda n: isinstance(n, (nodes.literal_block, nodes.raw)))):
        for text in list(block.findall(nodes.Text)):
            new = relative_paths(str(text), replacements)
            if new != str(text):
                text.parent.replace(text, nodes.Text(new))
        if isinstance(block, nodes.raw):
            block.rawsource = relative_paths(block.rawsource, replacements)


def _remember_replacements(app, env, docnames) -> None:
    env.casebook_path_replacements = path_replacements(Path(app.srcdir))


def setup(app):
    app.connect("env-before-read-docs", _remember_replacements)
    app.connect("doctree-read", _rewrite_outputs)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "env_version": 1}
