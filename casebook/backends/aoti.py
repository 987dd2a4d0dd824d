"""AOTInductor packages: written from an ``ExportedProgram``, loaded back in Python, and what ties them.

The C++ side (the book's ``run_aoti`` program) is `casebook.backends.aoti_cpp`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch


def write_package(
    program: torch.export.ExportedProgram,
    path: Path,
    args: Any = None,
    settings: Mapping[str, Any] | None = None,
) -> None:
    """``torch._inductor.aoti_compile_and_package`` into ``path``, with ``settings["inductor_configs"]``.

    Compiled with gradients off: Inductor freezes, if asked to, only then. With ``args``, compiled for
    those example inputs instead of the program's own (the caller's program is left untouched).
    """
    configs = dict((settings or {}).get("inductor_configs") or {})
    if args is not None:
        program = copy.copy(program)  # shallow: only example_inputs changes
        program.example_inputs = (tuple(args), {})
    with torch.no_grad():
        torch._inductor.aoti_compile_and_package(program, package_path=str(path), inductor_configs=configs)


def load_package(path: Path, device: torch.device | None = None, settings: Any = None) -> Callable[..., Any]:
    """The package as a callable, on ``device``'s GPU index for a CUDA device."""
    index = device.index if device is not None and device.type == "cuda" and device.index is not None else -1
    return torch._inductor.aoti_load_package(str(path), device_index=index)


def package_tie(path: Path, loaded: Any = None) -> str:
    """The torch version and the machine the package was compiled for (from its metadata)."""
    metadata = (loaded if loaded is not None else load_package(path)).get_metadata()
    return (
        f"torch {torch.__version__.split('+')[0]}, {metadata['AOTI_MACHINE']} with {metadata['AOTI_CPU_ISA']}"
    )
