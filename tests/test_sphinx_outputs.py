"""casebook.sphinx_outputs: build-machine paths in outputs become relative."""

import sys
import sysconfig
from pathlib import Path

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
