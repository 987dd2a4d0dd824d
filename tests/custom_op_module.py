"""A module that defines one custom operator without a fake kernel, written for a worker to import.

The TensorRT tests check that a worker process needs the operator's module *and* its fake kernel
(`before_load`). Each test gives its own namespace: one process may run both, and an operator can be
defined only once per process.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

SOURCE = """
import torch


@torch.library.custom_op("{namespace}::scale", mutates_args=())
def scale(x: torch.Tensor) -> torch.Tensor:
    return x * 3


def register_fake():
    scale.register_fake(lambda x: torch.empty_like(x))


def refuse():
    raise NotImplementedError("this registration is refused")
"""


def scale_op_module(folder: Path, namespace: str, monkeypatch) -> ModuleType:
    """Write ``folder/<namespace>.py`` (operator ``<namespace>::scale``, times 3), put ``folder`` on
    this process's path and the workers' (``PYTHONPATH``), and import it."""
    (folder / f"{namespace}.py").write_text(SOURCE.format(namespace=namespace))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", str(folder))
    return importlib.import_module(namespace)
