"""Torch-TensorRT on a machine with a CUDA GPU: compile a program, save it, load it back.

The backend registry's ``tensorrt`` entry, used by `lower`. Without a GPU, engines are built (not
run) by `casebook.backends.tensorrt.engine`.
"""

from __future__ import annotations

import difflib
import inspect
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch


def write_trt(
    program: torch.export.ExportedProgram, path: Path, args: tuple, settings: Mapping[str, Any]
) -> Callable[..., Any]:
    """``torch_tensorrt.dynamo.compile``, then ``torch_tensorrt.save`` to ``path``; the compiled module.

    Explicit ``torch_tensorrt.Input`` specs in the settings (``arg_inputs`` or ``inputs``, dynamic
    shape ranges) win over the example tensors. A module that cannot be saved still runs: the file
    is then not written (so not cached), with a warning. `lower` has already called the record's
    ``require`` (`require_tensorrt`), so the import is known to work.
    """
    import torch_tensorrt

    check_tensorrt_settings(torch_tensorrt, settings)
    input_specs = settings.get("arg_inputs", settings.get("inputs"))
    compile_kwargs = dict(settings) if input_specs is not None else {"inputs": list(args), **settings}
    module = torch_tensorrt.dynamo.compile(program, **compile_kwargs)
    try:
        torch_tensorrt.save(
            module,
            str(path),
            output_format="exported_program",
            arg_inputs=list(input_specs if input_specs is not None else args),
            kwarg_inputs=settings.get("kwarg_inputs"),
        )
    except Exception as e:  # a module that cannot be serialized still runs; it just is not cached
        Path(path).unlink(missing_ok=True)
        warnings.warn(f"Compiled TensorRT module could not be saved, so it is not cached: {e}", stacklevel=2)
    return module


def load_trt(path: Path, device: torch.device | None = None, settings: Any = None) -> Callable[..., Any]:
    import torch_tensorrt

    return torch_tensorrt.load(str(path)).module()


def trt_tie(path: Path, loaded: Any = None) -> str:
    import torch_tensorrt

    return f"Torch-TensorRT {torch_tensorrt.__version__}, its TensorRT, and the GPU model that built it"


def require_tensorrt(device: torch.device):
    """Import torch_tensorrt for an explicit request, or explain exactly what is missing."""
    if not torch.cuda.is_available():
        raise RuntimeError(
            "backend='tensorrt' needs a CUDA GPU: TensorRT builds engines for NVIDIA GPUs only, and "
            "torch.cuda.is_available() is False on this machine. Use backend='aoti' (or 'auto') here, or run "
            f"on an NVIDIA GPU machine with `pip install torch-tensorrt=={_torch_minor()}.*`."
        )
    problem = tensorrt_import_problem()
    if problem:
        raise ImportError(
            f"backend='tensorrt' needs torch_tensorrt, which does not import here ({problem}). Install the "
            f"release matching torch {torch.__version__}: `pip install torch-tensorrt=={_torch_minor()}.*` "
            "(it brings TensorRT; a CUDA GPU and driver are required)."
        )
    if device.type != "cuda":
        raise ValueError(
            f"backend='tensorrt' needs the program and inputs on CUDA, but the inputs are on {device}. Move both: "
            "`ep = torch.export.passes.move_to_device_pass(ep, 'cuda')` and `x = x.cuda()`."
        )
    import torch_tensorrt

    return torch_tensorrt


def tensorrt_import_problem() -> str | None:
    """None if torch_tensorrt imports, else a short description of why not."""
    try:
        import torch_tensorrt  # noqa: F401
    except Exception as e:  # torch_tensorrt raises a bare Exception when the TensorRT libraries are missing
        return f"{type(e).__name__}: {e}"
    return None


def check_tensorrt_settings(torch_tensorrt: Any, settings: Mapping[str, Any]) -> None:
    """Reject names torch_tensorrt.dynamo.compile would swallow silently through its **kwargs."""
    params = inspect.signature(torch_tensorrt.dynamo.compile).parameters
    named = {n for n, p in params.items() if p.kind is not inspect.Parameter.VAR_KEYWORD} - {
        "exported_program"
    }
    unknown = sorted(set(settings) - named)
    if unknown:
        hints = {u: difflib.get_close_matches(u, named, n=2) for u in unknown}
        raise TypeError(
            f"torch_tensorrt.dynamo.compile ({torch_tensorrt.__version__}) has no parameter(s) {unknown}; "
            f"it would ignore them silently. Close matches: {hints}"
        )


def _torch_minor() -> str:
    return ".".join(torch.__version__.split("+")[0].split(".")[:2])
