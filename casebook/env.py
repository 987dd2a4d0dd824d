"""What the book ran with: versions and hardware, shown on every page that runs code.

Export behaviour changes between PyTorch releases, so a reader comparing their own error with a page
needs to know exactly which stack produced the page.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import sys
from pathlib import Path

import torch

# The checkout the book is built from: the package lives in its `casebook/` folder.
REPO_ROOT = Path(__file__).resolve().parents[1]

# detectron2 is installed either from upstream source (distribution "detectron2") or from the
# PyPI repackaging "sal-detectron2"; both provide the `detectron2` module.
_DETECTRON2_DISTRIBUTIONS = ("detectron2", "sal-detectron2")
_TENSORRT_RTX_DISTRIBUTION = "torch-tensorrt-rtx"


def _distribution_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _detectron2_status() -> str:
    for name in _DETECTRON2_DISTRIBUTIONS:
        version = _distribution_version(name)
        if version is not None:
            return f"{version} (distribution {name})"
    return "not installed"


def _tensorrt_status() -> str:
    """Which Torch-TensorRT distribution is installed, and what it can do here, without importing it.

    `import torch_tensorrt` asks CUDA about the device, so it fails on a machine without a GPU; the
    book imports it only in subprocesses (`casebook.backends.trt_engine`, `trt_coverage`). Both
    distributions install the same `torch_tensorrt` package, so at most one is installed.
    """
    rtx = _distribution_version(_TENSORRT_RTX_DISTRIBUTION)
    if rtx is not None:
        runtime = _distribution_version("tensorrt-rtx") or "not installed"
        return (
            f"{rtx} (distribution {_TENSORRT_RTX_DISTRIBUTION}) with TensorRT for RTX {runtime}: "
            "builds engines without a GPU; running them needs an RTX GPU"
        )
    version = _distribution_version("torch-tensorrt")
    if version is None:
        return "not installed"
    if not torch.cuda.is_available():
        return f"{version} (analysis only: no CUDA device, so no TensorRT engines are built)"
    if importlib.util.find_spec("tensorrt") is None:
        return f"{version} (TensorRT runtime not installed)"
    return f"{version} with TensorRT {importlib.metadata.version('tensorrt')}"


def _accelerator() -> str:
    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        return f"CUDA {torch.version.cuda}, {torch.cuda.device_count()} x {name}"
    return f"CPU only ({platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads)"


def environment() -> dict[str, str]:
    """The stack this process runs on, as display strings."""
    return {
        "Python": sys.version.split()[0],
        "Platform": f"{platform.system()} {platform.machine()}",
        "torch": torch.__version__,
        "torchvision": _distribution_version("torchvision") or "not installed",
        "torch-tensorrt": _tensorrt_status(),
        "detectron2": _detectron2_status(),
        "transformers": _distribution_version("transformers") or "not installed",
        "Accelerator": _accelerator(),
        "CPU cores": str(os.cpu_count()),
    }


def versions_table() -> str:
    """The environment as a Markdown table."""
    rows = "\n".join(f"| {key} | {value} |" for key, value in environment().items())
    return f"| component | version |\n|---|---|\n{rows}"


def show_versions() -> None:
    """Render the environment table in a notebook (the collapsed first cell of every page)."""
    from IPython.display import Markdown, display

    display(Markdown("**This page was executed with:**\n\n" + versions_table()))
