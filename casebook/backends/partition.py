"""A partitioned program as data: its blocks in graph order (`Segment`), each of a kind (`KINDS`).

Torch-TensorRT puts the operators it supports into TensorRT engines and leaves the rest to PyTorch;
ExecuTorch puts what XNNPACK supports into XNNPACK subgraphs and leaves the rest to its portable
operators. Both partitions are a sequence of segments; `casebook.backends.partition_figure` draws
them.
"""

from __future__ import annotations

from dataclasses import dataclass

TENSORRT_COLOR = "#76b900"  # NVIDIA green
XNNPACK_COLOR = "#6a9bd8"
TORCH_COLOR = "#ee8a3c"


@dataclass(frozen=True)
class Kind:
    """How one kind of block is drawn: its box's first line, its legend entry, its color."""

    box: str
    legend: str
    color: str
    delegate: bool  # a delegated block is labelled with its operator count, a host block with its nodes


KINDS = {
    "tensorrt": Kind("TensorRT engine", "TensorRT engine", TENSORRT_COLOR, delegate=True),
    "torch": Kind("PyTorch", "runs in PyTorch", TORCH_COLOR, delegate=False),
    "xnnpack": Kind("XNNPACK", "XNNPACK subgraph", XNNPACK_COLOR, delegate=True),
    "portable": Kind("ExecuTorch", "ExecuTorch's portable operators", TORCH_COLOR, delegate=False),
}
FAMILIES = (("tensorrt", "torch"), ("xnnpack", "portable"))
"""Each delegate with the host that runs what it does not take: the legend shows both of a family."""


@dataclass(frozen=True)
class Segment:
    """One block of a partitioned graph, in graph order.

    ``op_count`` is the number of operators for a delegated block (the delegate's own count) and the
    number of nodes for a host block, whose ``nodes`` are their names (``getitem`` excluded).
    """

    kind: str  # a key of KINDS
    index: int  # position in graph order (for TensorRT also N in the submodule name _run_on_acc_N)
    op_count: int
    nodes: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        box = KINDS[self.kind].box
        if KINDS[self.kind].delegate:
            return f"{box}\n{self.op_count} op{'s' if self.op_count != 1 else ''}"
        if self.abbreviated:
            return self.counted_label
        return f"{box}\n{shorten(list(self.nodes))}"

    @property
    def counted_label(self) -> str:
        """The label that counts a host block's nodes instead of naming them."""
        return f"{KINDS[self.kind].box}\n{len(self.nodes)} node{'s' if len(self.nodes) != 1 else ''}"

    @property
    def abbreviated(self) -> bool:
        """Whether the label counts this host block's nodes instead of naming them (too many to fit)."""
        if KINDS[self.kind].delegate:
            return False
        named = shorten(list(self.nodes))
        return not self.nodes or len(set(self.nodes)) > 3 or len(named) > 24


def shorten(names: list[str], keep: int = 4) -> str:
    """Names joined by commas, a run of one name written once with its count, at most ``keep`` shown."""
    runs: list[tuple[str, int]] = []
    for name in names:
        if runs and runs[-1][0] == name:
            runs[-1] = (name, runs[-1][1] + 1)
        else:
            runs.append((name, 1))
    parts = [name if count == 1 else f"{name} ×{count}" for name, count in runs]
    if len(parts) <= keep:
        return ", ".join(parts)
    return ", ".join(parts[:keep]) + f", … ({len(names)} nodes)"
