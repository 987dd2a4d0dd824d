"""Sphinx extension: every address a page of the book once had still takes a reader to it.

`_config.yml` lists the earlier addresses (`earlier_addresses`: docnames such as
"failures/pytree_outputs"). A page keeps its name when it moves, so each earlier address goes to the
page of the same name wherever `_toc.yml` puts it now; this extension works out the relative link
and hands it to sphinx-reredirects (`redirects`), which writes a small page at the old address.
Moving a page is then `git mv`, `_toc.yml`, and its old address added to the list.
"""

from __future__ import annotations

import posixpath
from pathlib import Path

from casebook import toc

CONFIG = "earlier_addresses"


def redirects(earlier: list[str], root: Path) -> dict[str, str]:
    """Old docname -> the link, relative to the old page, of the page that has that name now."""
    current = set(toc.docnames(root))
    found = {}
    for old in earlier:
        if old in current:
            raise toc.TocError(
                f"{old!r} is listed in {CONFIG} but is a page of the book at that address: "
                f"take it off {CONFIG} in _config.yml"
            )
        new = toc.docname(toc.page_name(old), root)
        found[old] = posixpath.relpath(f"{new}.html", posixpath.dirname(old) or ".")
    return found


def _add_redirects(app, config) -> None:
    from sphinx.errors import ConfigError

    earlier = getattr(config, CONFIG)
    if not earlier:
        return
    try:
        computed = redirects(list(earlier), Path(app.srcdir))
    except toc.TocError as error:
        raise ConfigError(f"{CONFIG}: {error}") from error
    config.redirects = {**computed, **(config.redirects or {})}


def setup(app):
    app.add_config_value(CONFIG, [], "env")
    app.connect("config-inited", _add_redirects)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
