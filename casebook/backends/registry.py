"""Every backend the book ships an exported program to, one record each: `BACKENDS`.

A record says how to write the backend's artifact from an ``ExportedProgram``, how to load it back as
a callable, what a machine needs to run it and what the file is tied to. `lower` (compile, check
against eager, cache) and `routes.build_routes` (every CPU route side by side) both read it, so a new
backend is one module (its write and load) plus one entry here; CONTRIBUTING.md has the recipe.

The functions are named by module and attribute and imported on first use, so that importing this
registry does not import ExecuTorch, ONNX Runtime or Torch-TensorRT.
"""

from __future__ import annotations

import importlib
import json
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils import _pytree as pytree


def _late(target: str) -> Callable[..., Any]:
    """``"module:attribute"`` as a function that imports the module when it is first called."""
    module_name, attribute = target.split(":")

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module_name), attribute)(*args, **kwargs)

    call.__qualname__ = call.__name__ = f"{module_name}.{attribute}"
    return call


@dataclass(frozen=True)
class Backend:
    """One backend: how an exported program becomes its artifact, and how that runs.

    ``write(program, path, args, settings)`` writes the artifact (``args``: the example inputs) and may
    return the compiled callable it has in hand (TensorRT: a module that could not be saved still
    runs). ``load(path, device, settings)`` returns a callable that takes the program's tensors.
    ``tied_to(path, loaded)`` says what the artifact is tied to (a version, a machine). A backend with
    ``runs_artifact_of`` writes nothing of its own: it runs another backend's artifact in another
    process, so it has no ``load``.
    """

    name: str  # as lower(backend=...) takes it
    title: str  # as pages name it
    route: str  # its row on the side-by-side page (routes.build_routes)
    suffix: str  # the artifact's file name ends with this: program{suffix}
    needs: str  # what the machine that runs the artifact needs
    write: Callable[..., Any] | None
    load: Callable[..., Any] | None
    tied_to: Callable[[Path, Any], str]
    # the settings write and load take; None: the compiler's own keywords, which write checks
    settings: frozenset[str] | None = frozenset()
    devices: tuple[str, ...] = ("cpu",)  # device types it compiles for
    flat_outputs: bool = False  # load's callable returns a flat list of tensors, not the program's structure
    runs_artifact_of: str | None = None
    # called with the inputs' device before anything else; raises what the machine lacks, with what to do
    require: Callable[[torch.device], Any] | None = None
    key_extra: Mapping[str, str] = field(default_factory=dict)  # added to the settings in the cache key
    # load's callable without the book's conveniences, called as a service calls the runtime (the
    # side-by-side page's refusal probe runs it); None: `load` already is that
    load_as_given: Callable[..., Any] | None = None
    # the ways its runtime can be run with respect to input checks, each a column of the refusal
    # table: label -> AOTI_RUNTIME_CHECK_INPUTS on or off; empty: the runtime has no such switch
    check_inputs_modes: Mapping[str, bool] = field(default_factory=dict)


def _write_exported_program(
    program: torch.export.ExportedProgram, path: Path, args: Any, settings: Any
) -> None:
    torch.export.save(program, str(path))


def _load_exported_program(path: Path, device: torch.device, settings: Any) -> Callable[..., Any]:
    return torch.export.load(str(path)).module()


def _schema_tie(path: Path, loaded: Any) -> str:
    """The serialization schema version ``torch.export.save`` wrote into the archive's model.json."""
    with zipfile.ZipFile(path) as contents:
        names = [n for n in contents.namelist() if n.endswith("models/model.json")]
        if not names:
            raise ValueError(f"{path.name} has no models/model.json: not written by torch.export.save")
        version = json.loads(contents.read(names[0]))["schema_version"]
    return f"export schema {version['major']}.{version['minor']}: a newer torch loads it"


BACKENDS: Mapping[str, Backend] = {
    backend.name: backend
    for backend in (
        Backend(
            "exported_program",
            "ExportedProgram",
            "ExportedProgram",
            ".pt2",
            "Python and torch; not the model's source (custom operators: their library)",
            _write_exported_program,
            _load_exported_program,
            _schema_tie,
            devices=("cpu", "cuda"),
        ),
        Backend(
            "aoti",
            "AOTInductor",
            "AOTInductor (Python)",
            "_aoti.pt2",
            "Python and torch, the version that compiled it",
            _late("casebook.backends.aoti:write_package"),
            _late("casebook.backends.aoti:load_package"),
            _late("casebook.backends.aoti:package_tie"),
            settings=frozenset({"inductor_configs"}),
            devices=("cpu", "cuda"),
            # compiled with gradients off (write_package): keys from before that rule are not reused
            key_extra={"compiled_under": "no_grad"},
            check_inputs_modes={"default": False, "checks on": True},
        ),
        Backend(
            "aoti_cpp",
            "AOTInductor from C++",
            "AOTInductor (C++)",
            "_aoti.pt2",
            "libtorch's shared libraries (no Python), the version that compiled it",
            None,
            None,
            _late("casebook.backends.aoti:package_tie"),
            runs_artifact_of="aoti",
            # run_aoti turns the package's checks on unless told otherwise
            check_inputs_modes={"checks off": False, "run_aoti's default": True},
        ),
        Backend(
            "executorch",
            "ExecuTorch with XNNPACK",
            "ExecuTorch + XNNPACK",
            ".pte",
            "the ExecuTorch runtime built with the XNNPACK delegate (C++, no libtorch)",
            _late("casebook.backends.executorch_xnnpack:write_pte"),
            _late("casebook.backends.executorch_xnnpack:load_pte"),
            _late("casebook.backends.executorch_xnnpack:pte_tie"),
            flat_outputs=True,
            load_as_given=_late("casebook.backends.executorch_xnnpack:load_pte_as_given"),
        ),
        Backend(
            "onnx",
            "ONNX Runtime",
            "ONNX Runtime",
            ".onnx",
            "ONNX Runtime (C, C++, Python, Java, C# bindings; no libtorch)",
            _late("casebook.backends.onnx_runtime:write_onnx"),
            _late("casebook.backends.onnx_runtime:load_onnx"),
            _late("casebook.backends.onnx_runtime:onnx_tie"),
            settings=frozenset({"threads"}),
            flat_outputs=True,
        ),
        Backend(
            "tensorrt",
            "Torch-TensorRT",
            "Torch-TensorRT",
            "_trt.pt2",
            "a CUDA GPU, TensorRT and Torch-TensorRT of the versions that built it",
            _late("casebook.backends.tensorrt.runtime:write_trt"),
            _late("casebook.backends.tensorrt.runtime:load_trt"),
            _late("casebook.backends.tensorrt.runtime:trt_tie"),
            settings=None,
            devices=("cuda",),
            require=_late("casebook.backends.tensorrt.runtime:require_tensorrt"),
        ),
    )
}


def backend_of_route(route: str) -> Backend:
    """The backend whose row on the side-by-side page is `route` ("ONNX Runtime")."""
    for backend in BACKENDS.values():
        if backend.route == route:
            return backend
    raise ValueError(
        f"no backend has the route {route!r}; the routes are {[b.route for b in BACKENDS.values()]}"
    )


def flat(fn: Callable[..., Any]) -> Callable[..., list[torch.Tensor]]:
    """``fn`` returning its outputs' tensors as one list, in pytree order (how `flat_outputs` backends
    return them)."""

    def run(*args: torch.Tensor) -> list[torch.Tensor]:
        return pytree.tree_leaves(fn(*args))

    return run
