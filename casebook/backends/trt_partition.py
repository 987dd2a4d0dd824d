"""What a Torch-TensorRT dry run says about a graph's partition, as ordered segments and a figure.

A `~casebook.backends.trt_coverage.CoverageReport` carries the TensorRT and Torch blocks of the
partition in graph order (``report.blocks``, read by the dry-run worker from the partitioned graph
Torch-TensorRT returned). This module checks them against the report's counts (a change in how
Torch-TensorRT names or counts its blocks then raises instead of drawing a wrong picture) and turns
them into segments, table rows and a figure.

It also turns ``report.analysis`` into the sentence a page prints about where the numbers came from
(a real TensorRT on a GPU, or the labelled stand-in used on machines without one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .trt_coverage import CoverageReport

REAL_ANALYSIS = "tensorrt"
TENSORRT_COLOR = "#76b900"  # NVIDIA green
TORCH_COLOR = "#ee8a3c"


@dataclass(frozen=True)
class Segment:
    """One block of the partitioned graph, in graph order.

    ``op_count`` is the number of operators for a TensorRT block (Torch-TensorRT's count) and the
    number of nodes for a Torch block, whose ``nodes`` are their names (``getitem`` excluded).
    """

    kind: str  # "tensorrt" or "torch"
    index: int  # position in graph order, which is also N in the submodule name _run_on_acc_N / _run_on_gpu_N
    op_count: int
    nodes: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        if self.kind == "tensorrt":
            return f"TensorRT engine\n{self.op_count} op{'s' if self.op_count != 1 else ''}"
        if self.abbreviated:
            return f"PyTorch\n{len(self.nodes)} nodes"
        return f"PyTorch\n{', '.join(self.nodes)}"

    @property
    def abbreviated(self) -> bool:
        """Whether the label counts this Torch block's nodes instead of naming them (too many to fit)."""
        return self.kind == "torch" and (
            not self.nodes or len(self.nodes) > 3 or len(", ".join(self.nodes)) > 24
        )


def torch_nodes(report: CoverageReport) -> list[str]:
    """Names of the nodes left to run in Torch, in graph order (``getitem`` nodes excluded).

    A name is the node's name in the graph Torch-TensorRT partitioned (after its own decompositions
    and lowering passes), such as ``nms`` or ``index_1``.
    """
    return list(report.torch_node_names)


def partition_segments(report: CoverageReport) -> list[Segment]:
    """The TensorRT and Torch blocks of ``report``'s partition, in graph order."""
    if report.torch_block_count is None or report.blocks is None:
        raise ValueError(
            "the dry run did not count Torch blocks (global partitioner, or no supported op), "
            "so the order of the blocks is unknown"
        )
    engine_sizes = [block.op_count for block in report.blocks if block.kind == "tensorrt"]
    torch_block_count = sum(block.kind == "torch" for block in report.blocks)
    if (
        engine_sizes != list(report.trt_block_sizes)
        or len(engine_sizes) != report.trt_engine_count
        or torch_block_count != report.torch_block_count
        or any(block.kind not in ("tensorrt", "torch") for block in report.blocks)
    ):
        raise ValueError(
            f"the report's blocks {[(b.kind, b.name, b.op_count) for b in report.blocks]} disagree with "
            f"its counts ({report.trt_engine_count} engine(s) of sizes {report.trt_block_sizes}, "
            f"{report.torch_block_count} Torch block(s)): has the dry-run worker's result format changed "
            "(Torch-TensorRT's block names or counts, say)? Check "
            "casebook.backends._trt_dryrun_worker._partition_blocks."
        )
    return [
        Segment(block.kind, index, block.op_count, block.nodes) for index, block in enumerate(report.blocks)
    ]


def describe_analysis(report: CoverageReport) -> str:
    """One paragraph, true on any machine, saying what produced ``report`` and what it does not prove."""
    versions = report.versions
    torch_trt = versions.get("torch_tensorrt", "?")
    if report.analysis == REAL_ANALYSIS:
        return (
            f"Torch-TensorRT {torch_trt} ran this dry run with TensorRT {versions.get('tensorrt', '?')} "
            "on this machine's GPU. A dry run stops after partitioning, so these are the engines "
            "Torch-TensorRT plans to build; a compile without `dryrun` builds them."
        )
    trt = versions.get("tensorrt", "?").removesuffix("+standin")
    return (
        "**Analysis only, no GPU.** This machine has no CUDA GPU, so Torch-TensorRT "
        f"{torch_trt} ran its dry run with a labelled stand-in for TensorRT {trt} (no libnvinfer). "
        "The operator support and the partition are Torch-TensorRT's own, computed exactly as a real "
        "compile would; **no TensorRT engine was built**, so whether TensorRT accepts each block "
        "at build time was not tested here."
    )


def partition_figure(
    reports: Mapping[str, CoverageReport], *, title: str = "", notes: bool = True, box_width: float = 1.55
):
    """Draw each report's partition as a row of blocks in graph order, labelled by ``reports``' keys.

    TensorRT engines are green with their operator count; Torch blocks are orange with their nodes.
    Where one of several Torch blocks has too many nodes to name in its box, the row's note names the
    nodes of each Torch block of the row, blocks separated by " | ".
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch

    rows = [(label, partition_segments(report)) for label, report in reports.items()]
    longest = max((len(segments) for _, segments in rows), default=1)
    step, height, row_gap = box_width + 0.35, 0.62, 1.25
    fig, ax = plt.subplots(figsize=(2.6 + longest * step * 1.05, 0.6 + row_gap * len(rows) * 0.95))
    ax.set_axis_off()
    for r, (label, segments) in enumerate(rows):
        y = -r * row_gap
        ax.text(-0.25, y, label, ha="right", va="center", fontsize=9, family="monospace")
        for i, segment in enumerate(segments):
            x = i * step
            color = TENSORRT_COLOR if segment.kind == "tensorrt" else TORCH_COLOR
            ax.add_patch(
                FancyBboxPatch(
                    (x, y - height / 2),
                    box_width,
                    height,
                    boxstyle="round,pad=0.02",
                    facecolor=color,
                    edgecolor="#33475b",
                    alpha=0.85,
                )
            )
            ax.text(x + box_width / 2, y, segment.label, ha="center", va="center", fontsize=8)
            if i:
                ax.add_patch(
                    FancyArrowPatch(
                        (x - step + box_width, y),
                        (x, y),
                        arrowstyle="-|>",
                        mutation_scale=10,
                        color="#33475b",
                        shrinkA=1,
                        shrinkB=1,
                    )
                )
        torch_segments = [s for s in segments if s.kind == "torch"]
        if notes and len(torch_segments) > 1 and any(s.abbreviated for s in torch_segments):
            # A box that only counts its nodes does not say which nodes it holds; with one Torch
            # block the table's "runs in Torch" column does, with several the note names them per block.
            per_block = [_shorten(list(s.nodes)) for s in torch_segments]
            ax.text(
                0,
                y - height / 2 - 0.12,
                "PyTorch nodes across these blocks: " + " | ".join(per_block),
                ha="left",
                va="top",
                fontsize=7.5,
                color="#33475b",
            )
    ax.set_xlim(-2.6, longest * step)
    ax.set_ylim(-row_gap * (len(rows) - 1) - 0.9, 0.6)
    ax.legend(
        handles=[
            Patch(facecolor=TENSORRT_COLOR, label="TensorRT engine"),
            Patch(facecolor=TORCH_COLOR, label="runs in PyTorch"),
        ],
        loc="upper right",
        bbox_to_anchor=(1.0, 1.12),
        ncol=2,
        fontsize=8,
        frameon=False,
    )
    if title:
        ax.set_title(title, fontsize=11, loc="left", pad=16)
    fig.tight_layout()
    return fig


def partition_rows(reports: Mapping[str, CoverageReport]) -> list[dict]:
    """One row per report for a comparison table.

    ``converter coverage`` is the share of operators that have a TensorRT converter (and are not
    forced to Torch); ``ops in TensorRT`` the share that the partition actually puts in engines,
    which is lower when blocks smaller than ``min_block_size`` are left to Torch.
    """
    rows = []
    for label, report in reports.items():
        in_engines = sum(report.trt_block_sizes) / report.total_ops if report.total_ops else 0.0
        rows.append(
            {
                "setting": label,
                "TensorRT engines": report.trt_engine_count,
                "ops per engine": report.trt_block_sizes,
                "Torch blocks": report.torch_block_count,
                "runs in Torch": _shorten(torch_nodes(report)),
                "converter coverage": f"{report.coverage:.1%}",
                "ops in TensorRT": f"{in_engines:.1%}",
            }
        )
    return rows


def _shorten(names: list[str], keep: int = 4) -> str:
    if len(names) <= keep:
        return ", ".join(names)
    return ", ".join(names[:keep]) + f", … ({len(names)} nodes)"
