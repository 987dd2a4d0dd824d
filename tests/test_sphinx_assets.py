"""casebook.sphinx_assets: each script loaded once."""

from sphinx.builders.html._assets import _JavaScript

from casebook.sphinx_assets import unique_scripts


def test_inline_scripts_added_twice_are_kept_once():
    config = 'const THEBE_JS_URL = "x"'
    scripts = [
        _JavaScript("_static/a.js"),
        _JavaScript(None, body=config),
        _JavaScript("", body=config),  # the same script, added by a second setup with "" for "no file"
        _JavaScript("_static/a.js", **{"async": "async"}),  # different attributes: a different tag
    ]
    kept = unique_scripts(scripts)
    assert kept == [scripts[0], scripts[1], scripts[3]]
