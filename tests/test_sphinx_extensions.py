"""The book's Sphinx extensions: relative paths in outputs, each script loaded once."""

import sys
import sysconfig
from pathlib import Path

from sphinx.builders.html._assets import _JavaScript

from casebook.sphinx_assets import unique_scripts
from casebook.sphinx_outputs import path_replacements, relative_paths


def test_build_machine_paths_become_relative():
    root = Path("/home/ci/checkout")
    replacements = path_replacements(root)
    site = sysconfig.get_paths()["purelib"]
    stdlib = sysconfig.get_paths()["stdlib"]
    python = f"python{sys.version_info.major}.{sys.version_info.minor}"
    text = (
        f'File "{site}/torch/export/_trace.py", line 3\n'
        f"{stdlib}/inspect.py:1755\n"
        f"aoti -> {root}/.artifacts/compiled/a.pt2\n"
        f'File "{root}/casebook/models/deformable_detr.py"'
    )
    assert relative_paths(text, replacements) == (
        'File "site-packages/torch/export/_trace.py", line 3\n'
        f"{python}/inspect.py:1755\n"
        "aoti -> .artifacts/compiled/a.pt2\n"
        'File "casebook/models/deformable_detr.py"'
    )


def test_the_most_specific_prefix_wins():
    # site-packages usually lies inside the checkout (.venv): it must not become ".venv/lib/..."
    replacements = path_replacements(Path(sys.prefix).parent)
    prefixes = [prefix for prefix, _ in replacements]
    assert prefixes == sorted(prefixes, key=len, reverse=True)
    site = sysconfig.get_paths()["purelib"]
    assert relative_paths(f"{site}/torch/x.py", replacements) == "site-packages/torch/x.py"


def test_text_without_paths_is_unchanged():
    assert relative_paths("parity OK on 3 inputs", path_replacements(Path("/x"))) == "parity OK on 3 inputs"


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
