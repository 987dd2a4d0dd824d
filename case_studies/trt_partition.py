"""What a Torch-TensorRT dry run says about a graph's partition, as ordered segments and a figure.

A `~case_studies.backends.trt_coverage.CoverageReport` counts TensorRT engines and Torch blocks;
this module puts them in graph order so a page can draw the partition. The order comes from the
names Torch-TensorRT's fast partitioner gives the submodules it creates: ``_run_on_acc_N`` for a
TensorRT block and ``_run_on_gpu_N`` for a Torch fallback block, numbered along the graph. The engine
names and sizes are read from the dry run's own summary (``report.text``) and checked against the
report's counts, so a change in that summary's format raises instead of drawing a wrong picture.

It also turns ``report.analysis`` into the sentence a page prints about where the numbers came from
(a real TensorRT on a GPU, or the labelled stand-in used on machines without one).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from .backends.trt_coverage import CoverageReport

REAL_ANALYSIS = "tensorrt"
TENSORRT_COLOR = "#76b900"  # NVIDIA green
TORCH_COLOR = "#ee8a3c"

_ENGINE = re.compile(
    r"TRT Engine #(?P<number>\d+) - Submodule name: _run_on_acc_(?P<index>\d+)\s*\n"
    r".*?Number of Operators in Engine: (?P<ops>\d+)",
    re.DOTALL,
)
_TORCH_NODE = re.compile(r"^Node: (?P<target>\S+), with layer location: (?P<location>.*)$")


@dataclass(frozen=True)
class Segment:
    """One block of the partitioned graph, in graph order.

    ``op_count`` is the number of operators for a TensorRT block (Torch-TensorRT's count) and the
    number of nodes for a Torch block. For a Torch block, ``nodes`` lists its node names when the
    dry run's output determines them, and is empty (with ``op_count`` None) when it does not: the
    dry run lists the Torch nodes of all blocks together, so with several Torch blocks holding more
    nodes than there are blocks, which node is in which block is not known.
    """

    kind: str  # "tensorrt" or "torch"
    index: int  # N in _run_on_acc_N / _run_on_gpu_N
    op_count: int | None
    nodes: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        if self.kind == "tensorrt":
            return f"TensorRT engine\n{self.op_count} op{'s' if self.op_count != 1 else ''}"
        if not self.nodes:
            return "PyTorch block\n(nodes: see row note)"
        shown = ", ".join(self.nodes)
        if len(self.nodes) > 3 or len(shown) > 24:
            return f"PyTorch\n{len(self.nodes)} nodes"
        return f"PyTorch\n{shown}"


def torch_nodes(report: CoverageReport) -> list[str]:
    """Names of the nodes left to run in Torch, in graph order (``getitem`` nodes excluded).

    A name is the node's name in the graph Torch-TensorRT partitioned (after its own decompositions
    and lowering passes), such as ``nms`` or ``index_1``.
    """
    names = []
    for entry in report.to_run_in_torch:
        match = _TORCH_NODE.match(entry)
        if match is None:
            raise ValueError(f"unexpected entry in the dry run's Torch node list: {entry!r}")
        names.append(match["location"].rsplit("/", 1)[-1])
    return names


def partition_segments(report: CoverageReport) -> list[Segment]:
    """The TensorRT and Torch blocks of ``report``'s partition, in graph order."""
    if report.torch_block_count is None:
        raise ValueError(
            "the dry run did not count Torch blocks (global partitioner, or no supported op), "
            "so the order of the blocks is unknown"
        )
    engines = {int(m["index"]): int(m["ops"]) for m in _ENGINE.finditer(report.text)}
    if len(engines) != report.trt_engine_count or [engines[i] for i in sorted(engines)] != list(
        report.trt_block_sizes
    ):
        raise ValueError(
            f"the dry run's summary lists engines {engines}, but the report counts "
            f"{report.trt_engine_count} engine(s) of sizes {report.trt_block_sizes}: has the summary's "
            "format changed?"
        )
    count = report.trt_engine_count + report.torch_block_count
    if any(index >= count for index in engines):
        raise ValueError(f"engine submodule numbers {sorted(engines)} do not fit {count} blocks")
    torch_indices = [i for i in range(count) if i not in engines]
    names = torch_nodes(report)
    if len(torch_indices) == 1:
        groups: list[tuple[str, ...]] = [tuple(names)]
    elif len(names) == len(torch_indices):
        groups = [(name,) for name in names]
    else:
        groups = [()] * len(torch_indices)
    torch_blocks = {
        index: Segment("torch", index, len(group) if group else None, group)
        for index, group in zip(torch_indices, groups, strict=True)
    }
    return [Segment("tensorrt", i, engines[i]) if i in engines else torch_blocks[i] for i in range(count)]


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
    Where the nodes of several Torch blocks cannot be told apart, the row's note lists them together.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch

    rows = [(label, partition_segments(report), report) for label, report in reports.items()]
    longest = max((len(segments) for _, segments, _ in rows), default=1)
    step, height, row_gap = box_width + 0.35, 0.62, 1.25
    fig, ax = plt.subplots(figsize=(2.6 + longest * step * 1.05, 0.6 + row_gap * len(rows) * 0.95))
    ax.set_axis_off()
    for r, (label, segments, report) in enumerate(rows):
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
        if notes and any(s.kind == "torch" and not s.nodes for s in segments):
            ax.text(
                0,
                y - height / 2 - 0.12,
                "PyTorch nodes across these blocks: " + ", ".join(torch_nodes(report)),
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
