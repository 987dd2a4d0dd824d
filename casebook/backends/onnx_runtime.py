"""ONNX files from ``torch.onnx.export(..., dynamo=True)``, read and run with ONNX Runtime on the CPU.

The export itself is one call on the page. This module reads what the file holds (operators, the
input dimensions it declares) and wraps an ``onnxruntime.InferenceSession`` so it can be called like
the model: tensors in, tensors out, with a fixed thread count.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime
import torch


def _load(path: str | os.PathLike[str]) -> onnx.ModelProto:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no ONNX file at {path}: write one with torch.onnx.export(...).save(path)")
    return onnx.load(str(path))


def operator_counts(path: str | os.PathLike[str]) -> dict[str, int]:
    """How many nodes of each ONNX operator the file's main graph has, most frequent first."""
    return dict(Counter(node.op_type for node in _load(path).graph.node).most_common())


def declared_inputs(path: str | os.PathLike[str]) -> dict[str, list[int | str]]:
    """Each graph input's dimensions as the file declares them: a number, or a symbol's name."""
    return {
        graph_input.name: [dim.dim_param or dim.dim_value for dim in graph_input.type.tensor_type.shape.dim]
        for graph_input in _load(path).graph.input
    }


def opsets(path: str | os.PathLike[str]) -> dict[str, int]:
    """The operator-set versions the file imports ("" is the default ONNX domain)."""
    return {entry.domain or "ai.onnx": entry.version for entry in _load(path).opset_import}


class OnnxRuntimeProgram:
    """An ONNX file in an ONNX Runtime CPU session; calling it runs the graph on tensors."""

    def __init__(self, path: str | os.PathLike[str], *, threads: int):
        if not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be a whole number >= 1, got {threads!r}")
        _load(path)  # a clear error for a missing file, before ONNX Runtime's own
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # ONNX Runtime's threads spin after each run, waiting for the next: timed in turns with eager
        # in one process, they would take CPU from eager. They sleep instead.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.input_names = [graph_input.name for graph_input in self.session.get_inputs()]

    def __call__(self, *tensors: torch.Tensor) -> list[torch.Tensor]:
        if len(tensors) != len(self.input_names):
            raise ValueError(
                f"the graph takes {len(self.input_names)} input(s) {self.input_names}, got {len(tensors)}"
            )
        feed = {
            name: tensor.detach().cpu().numpy()
            for name, tensor in zip(self.input_names, tensors, strict=True)
        }
        return [torch.from_numpy(np.asarray(output)) for output in self.session.run(None, feed)]


def write_onnx(
    program: torch.export.ExportedProgram, path: Path, args: Any = None, settings: Any = None
) -> None:
    """``torch.onnx.export(program, dynamo=True)``, saved to ``path`` (the backend registry's write)."""
    torch.onnx.export(program, dynamo=True, verbose=False).save(str(path))


def load_onnx(
    path: Path, device: Any = None, settings: Mapping[str, Any] | None = None
) -> OnnxRuntimeProgram:
    """The file in an ONNX Runtime CPU session with ``settings["threads"]`` threads (default: torch's)."""
    return OnnxRuntimeProgram(path, threads=(settings or {}).get("threads") or torch.get_num_threads())


def onnx_tie(path: Path, loaded: Any = None) -> str:
    """The default-domain opset and the IR version the file needs its runtime to support."""
    ir_version = onnx.load(str(path), load_external_data=False).ir_version
    return f"opset {opsets(path)['ai.onnx']}, IR version {ir_version}: a runtime that supports both"
