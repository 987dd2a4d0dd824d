"""casebook.backends.registry: one record per backend, read by lower() and build_routes()."""

import subprocess
import sys

import pytest

from casebook.backends import lowering
from casebook.backends.registry import BACKENDS
from casebook.backends.routes import ROUTES


def test_every_record_is_complete_and_lower_and_the_routes_read_them():
    for name, entry in BACKENDS.items():
        assert entry.name == name and entry.title and entry.route and entry.needs, name
        assert entry.suffix.endswith((".pt2", ".pte", ".onnx")), name
        if entry.runs_artifact_of is None:
            assert entry.write is not None and entry.load is not None, name
        else:
            assert entry.runs_artifact_of in BACKENDS and entry.load is None, name
    # lower() compiles to every backend that loads in this process; the routes are the CPU ones
    assert set(lowering.BACKENDS) == {"auto", "eager", *(n for n, e in BACKENDS.items() if e.load)}
    assert set(ROUTES) == {n for n, e in BACKENDS.items() if "cpu" in e.devices}


@pytest.mark.slow
def test_importing_the_registry_imports_no_backend_runtime():
    """Its functions import their modules when first called: lower() does not load ExecuTorch."""
    code = (
        "import sys, casebook.backends.lowering, casebook.backends.registry; "
        "print(sorted(m for m in ('executorch', 'onnxruntime', 'torch_tensorrt') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


@pytest.mark.slow
def test_a_new_backend_is_one_entry_every_list_of_routes_reads(tmp_path):
    """A CPU backend added to the registry (here a stand-in that writes and loads an ExportedProgram)
    shows up in lower(), the routes, the refusal probe's routes and columns, and its worker's loader,
    with no other list to edit."""
    code = """
import torch
from casebook.backends import registry
registry.BACKENDS["copy"] = registry.Backend(
    "copy", "A copy", "A copy of the program", "_copy.pt2", "Python and torch",
    registry._write_exported_program, registry._load_exported_program, registry._schema_tie,
)
import importlib
from casebook.backends import _refusal_worker, lowering, refusals, routes
importlib.reload(lowering)  # the package imported it before the entry was added
assert "copy" in lowering.BACKENDS and "copy" in routes.ROUTES, (lowering.BACKENDS, routes.ROUTES)
assert "A copy of the program" in refusals.ROUTES and "A copy of the program" in refusals.IN_PROCESS_LOADERS
assert refusals.refusal_columns()["A copy of the program"] == ("A copy of the program", False)
program = torch.export.export(torch.nn.Linear(2, 2), (torch.randn(1, 2),))
import sys
torch.export.save(program, sys.argv[1])
run = _refusal_worker.load("A copy of the program", sys.argv[1])
print(tuple(run(torch.randn(1, 2)).shape))
"""
    artifact = tmp_path / "program_copy.pt2"
    ran = subprocess.run([sys.executable, "-c", code, str(artifact)], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.strip() == "(1, 2)"


def test_an_unknown_route_names_the_routes_there_are():
    from casebook.backends.registry import backend_of_route

    with pytest.raises(
        ValueError, match=r"no backend has the route 'TVM'; the routes are \['ExportedProgram'"
    ):
        backend_of_route("TVM")
