"""What a TensorRT build passes without a word: the evidence the doctor reads from the program and the build.

Each function returns evidence lines (empty: nothing found) for one catalog entry, read from the
program's graph and ranges and from what the build reported (its engines' input profiles and build
logs). None of them runs an engine: this machine cannot.
"""

from __future__ import annotations

import sympy
import torch

from ..introspect import symbol_range

# Torch-TensorRT 2.14's `topk` converter takes k up to this (`topk_sort_validator`).
TOPK_LIMIT = 3840
# The line a TensorRT build log has for each KV-cache update layer in the engine.
KV_CACHE_LAYER = "KVCACHE_UPDATE"


def lowered_minimums(program: torch.export.ExportedProgram, build) -> list[str]:
    """Engine inputs whose profile starts below the program's lower bound of 2 (`tensorrt-min-two-lowered`).

    Only the program's own inputs are compared, by name: their sizes are symbols the reader set with
    `Dim`. A count known only at run time (NMS's) has no such name, and its bound of 2 is a kernel's.
    """
    inputs = {
        node.name: node.meta["val"]
        for node in program.graph.nodes
        if node.op == "placeholder" and isinstance(node.meta.get("val"), torch.Tensor)
    }
    found = []
    for block in build.engines:
        for profile in block.profile:
            value = inputs.get(profile.name)
            if value is None:
                continue
            for axis, size in enumerate(value.shape):
                if not isinstance(size, torch.SymInt) or not isinstance(size.node.expr, sympy.Symbol):
                    continue
                bounds = symbol_range(program, size.node.expr)
                low = bounds[0] if bounds else None
                if low == 2 and profile.min[axis] < low:
                    found.append(
                        f"{block.name}: input {profile.name}, dimension {axis}: the program's range starts "
                        f"at {low}, the engine's profile at {profile.min[axis]} ({profile})"
                    )
    return found


def large_topks(program: torch.export.ExportedProgram, unsupported_ops) -> list[str]:
    """`topk` nodes whose k is above what Torch-TensorRT's converter takes, when the dry run left `topk`
    to PyTorch (`tensorrt-topk-over-3840`)."""
    if not any(str(op).endswith("aten.topk.default") for op in unsupported_ops):
        return []
    return [
        f"node {node.name}: topk with k={node.args[1]}, above the {TOPK_LIMIT} Torch-TensorRT's converter "
        "takes; the dry run left it to PyTorch"
        for node in program.graph.nodes
        if node.target is torch.ops.aten.topk.default
        and isinstance(node.args[1], int)
        and node.args[1] > TOPK_LIMIT
    ]


def strided_kv_writes(program: torch.export.ExportedProgram, build) -> list[str]:
    """`slice_scatter` nodes with a step, in a build whose engine holds a KV-cache update layer
    (`tensorrt-kv-cache-strided-write`): that layer ignores the step."""
    strided = [
        node
        for node in program.graph.nodes
        if node.target is torch.ops.aten.slice_scatter.default and _step(node) not in (None, 1)
    ]
    if not strided:
        return []
    layers = [
        f"{block.name}: {line.strip()}"
        for block in build.engines
        if block.build_log is not None and block.build_log.is_file()
        for line in block.build_log.read_text(errors="replace").splitlines()
        if line.startswith(KV_CACHE_LAYER)
    ]
    if not layers:
        return []
    writes = [
        f"node {node.name}: slice_scatter with dim, start, end, step {tuple(node.args[2:])}"
        for node in strided
    ]
    return writes + layers[:2]


def _step(node) -> int | None:
    """`slice_scatter(input, src, dim=0, start=None, end=None, step=1)`'s step, from args or kwargs."""
    if len(node.args) > 5:
        return node.args[5]
    return node.kwargs.get("step", 1)
