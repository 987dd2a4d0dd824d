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

# detectron2 is installed either from upstream source (distribution "detectron2") or from the
# PyPI repackaging "sal-detectron2"; both provide the `detectron2` module.
_DETECTRON2_DISTRIBUTIONS = ("detectron2", "sal-detectron2")
TENSORRT_RTX_ENV = "CASEBOOK_TENSORRT_RTX"


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
    """Describe the Torch-TensorRT installs without importing them where they cannot work.

    `import torch_tensorrt` needs libnvinfer and a CUDA device; on a CPU machine the book installs
    torch-tensorrt for its pure-Python partition analysis, which runs in a subprocess, and
    Torch-TensorRT for RTX in a folder of its own for real engine builds (also in subprocesses).
    """
    version = _distribution_version("torch-tensorrt")
    if version is None:
        status = "not installed"
    elif not torch.cuda.is_available():
        status = f"{version} (dry-run analysis only: no CUDA device)"
    elif importlib.util.find_spec("tensorrt") is None:
        status = f"{version} (TensorRT runtime not installed)"
    else:
        status = f"{version} with TensorRT {importlib.metadata.version('tensorrt')}"
    rtx = tensorrt_rtx_versions()
    if "torch-tensorrt-rtx" in rtx:
        status += (
            f"; engines built with torch-tensorrt-rtx {rtx['torch-tensorrt-rtx']} and TensorRT for RTX "
            f"{rtx.get('tensorrt-rtx', '?')} (no GPU needed to build; running them needs an RTX GPU)"
        )
    return status


def tensorrt_rtx_site() -> Path:
    """The folder holding Torch-TensorRT for RTX (``make install`` puts it in ``.venv/tensorrt-rtx``).

    It installs the same ``torch_tensorrt`` package as torch-tensorrt, so it is kept out of the
    environment's site-packages; only processes that build engines put it first on their path.
    ``$CASEBOOK_TENSORRT_RTX`` points elsewhere.
    """
    return Path(os.environ.get(TENSORRT_RTX_ENV) or Path(sys.prefix) / "tensorrt-rtx")


def tensorrt_rtx_versions() -> dict[str, str]:
    """``{"torch-tensorrt-rtx": ..., "tensorrt-rtx": ...}`` as installed in `tensorrt_rtx_site`, or {}."""
    found = {}
    for dist in importlib.metadata.distributions(path=[str(tensorrt_rtx_site())]):
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name in ("torch-tensorrt-rtx", "tensorrt-rtx"):
            found[name] = dist.version
    return found


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
