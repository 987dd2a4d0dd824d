"""casebook.backends.registry: one record per backend, read by lower() and build_routes()."""

import subprocess
import sys

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


def test_importing_the_registry_imports_no_backend_runtime():
    """Its functions import their modules when first called: lower() does not load ExecuTorch."""
    code = (
        "import sys, casebook.backends.lowering, casebook.backends.registry; "
        "print(sorted(m for m in ('executorch', 'onnxruntime', 'torch_tensorrt') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"
