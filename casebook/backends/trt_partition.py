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

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass

from .trt_coverage import CoverageReport

REAL_ANALYSIS = "tensorrt"
TENSORRT_COLOR = "#76b900"  # NVIDIA green
TORCH_COLOR = "#ee8a3c"
_INK = "#33475b"
# Text sizes (points) of partition_figure: at the column width all are at least MIN_FONT_PX on the page.
_TITLE_PT, _LABEL_PT, _BOX_PT, _NOTE_PT = 11.0, 9.0, 9.0, 8.5


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
    """Draw each report's partition as a strip of blocks in graph order, labelled by ``reports``' keys.

    TensorRT engines are green with their operator count; Torch blocks are orange with their nodes.
    Where one of several Torch blocks has too many nodes to name in its box, the strip's note names
    the nodes of each Torch block of the strip, blocks separated by " | ".

    The figure fits the book's text column (`casebook.figures.COLUMN_WIDTH_IN`) with its text at a
    readable size: the strips are stacked, each under its label, and a strip with more blocks than
    fit across the column wraps onto further lines, joined by an arrow that turns down. Every strip
    uses the same box width (at most ``box_width`` inches), so the rows line up block for block.
    """
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
    from matplotlib.path import Path

    from ..figures import _PAD_IN, COLUMN_WIDTH_IN, _text_size_in, _wrap, inch_canvas

    rows = [(label, partition_segments(report)) for label, report in reports.items()]
    width_in = COLUMN_WIDTH_IN - 2 * _PAD_IN  # the inline backend pads the saved image by _PAD_IN
    gap, inner_pad, line_gap, strip_gap = 0.3, 0.07, 0.3, 0.3

    # Boxes per line: as many as fit with "TensorRT engine" on one line; one box width for all strips.
    longest = max((len(segments) for _, segments in rows), default=1)
    needed = max(_text_size_in("TensorRT engine", _BOX_PT)[0] + 2 * inner_pad, 1.1)
    per_line = max(1, min(longest, int((width_in + gap) // (needed + gap))))
    box_w = min((width_in - (per_line - 1) * gap) / per_line, max(box_width, needed))
    lines_of = {
        (r, i): _wrap(segment.label, _BOX_PT, box_w - 2 * inner_pad)
        for r, (_, segments) in enumerate(rows)
        for i, segment in enumerate(segments)
    }

    def lines_h(n: int, size: float) -> float:  # matplotlib spaces lines 1.2 line heights apart
        return n * _text_size_in("Ag", size)[1] * 1.2

    box_h = max((lines_h(len(lines), _BOX_PT) for lines in lines_of.values()), default=0.3)
    box_h += 2 * inner_pad

    def wrapped(text: str, size: float, *, monospace: bool = False) -> tuple[str, float]:
        if monospace:  # a monospace character is 0.6 em wide
            lines = textwrap.wrap(text, max(1, int(width_in / (0.6 * size / 72)))) or [""]
        else:
            lines = _wrap(text, size, width_in)
        return "\n".join(lines), lines_h(len(lines), size)

    # Lay out top to bottom, y measured downwards in inches.
    items = []  # (kind, x, y, payload)
    y = 0.05
    if title:
        text, h = wrapped(title, _TITLE_PT)
        items.append(("title", 0.0, y, text))
        y += h + 0.12
    items.append(("legend", 0.0, y, None))
    y += _text_size_in("Ag", _LABEL_PT)[1] + 0.2
    for r, (label, segments) in enumerate(rows):
        text, h = wrapped(label, _LABEL_PT, monospace=True)
        items.append(("label", 0.0, y, text))
        y += h + 0.08
        n_lines = max(1, -(-len(segments) // per_line))
        for i, segment in enumerate(segments):
            line, slot = divmod(i, per_line)
            x = slot * (box_w + gap)
            top = y + line * (box_h + line_gap)
            items.append(("box", x, top, (segment, "\n".join(lines_of[r, i]))))
            if i and slot:  # from the previous box, on the same line
                items.append(("arrow", x, top, [(x - gap, top + box_h / 2), (x, top + box_h / 2)]))
            elif i:  # from the end of the line above: down, back along the gap, down into this box
                prev_x = (per_line - 1) * (box_w + gap) + box_w / 2
                lane = top - line_gap / 2
                points = [(prev_x, top - line_gap), (prev_x, lane), (box_w / 2, lane), (box_w / 2, top)]
                items.append(("arrow", x, top, points))
        y += n_lines * box_h + (n_lines - 1) * line_gap
        torch_segments = [s for s in segments if s.kind == "torch"]
        if notes and len(torch_segments) > 1 and any(s.abbreviated for s in torch_segments):
            # A box that only counts its nodes does not say which nodes it holds; with one Torch
            # block the table's "runs in Torch" column does, with several the note names them per block.
            per_block = [_shorten(list(s.nodes)) for s in torch_segments]
            text, h = wrapped("PyTorch nodes across these blocks: " + " | ".join(per_block), _NOTE_PT)
            items.append(("note", 0.0, y + 0.08, text))
            y += h + 0.08
        y += strip_gap
    height_in = y - strip_gap + 0.05

    fig, ax = inch_canvas(width_in, height_in)
    for kind, x, y, payload in items:
        if kind == "title":
            ax.text(x, y, payload, ha="left", va="top", fontsize=_TITLE_PT)
        elif kind == "legend":
            swatch = _text_size_in("Ag", _LABEL_PT)[1]
            for color, name in ((TENSORRT_COLOR, "TensorRT engine"), (TORCH_COLOR, "runs in PyTorch")):
                ax.add_patch(
                    FancyBboxPatch(
                        (x, y), 1.6 * swatch, swatch, boxstyle="square,pad=0", facecolor=color, alpha=0.85
                    )
                )
                ax.text(
                    x + 1.6 * swatch + 0.08, y + swatch / 2, name, ha="left", va="center", fontsize=_LABEL_PT
                )
                x += 1.6 * swatch + 0.08 + _text_size_in(name, _LABEL_PT)[0] + 0.3
        elif kind == "label":
            ax.text(x, y, payload, ha="left", va="top", fontsize=_LABEL_PT, family="monospace", color=_INK)
        elif kind == "box":
            segment, text = payload
            ax.add_patch(
                FancyBboxPatch(
                    (x, y),
                    box_w,
                    box_h,
                    boxstyle="round,pad=0,rounding_size=0.05",
                    facecolor=TENSORRT_COLOR if segment.kind == "tensorrt" else TORCH_COLOR,
                    edgecolor=_INK,
                    alpha=0.85,
                )
            )
            ax.text(x + box_w / 2, y + box_h / 2, text, ha="center", va="center", fontsize=_BOX_PT)
        elif kind == "arrow":
            ax.add_patch(
                FancyArrowPatch(
                    path=Path(payload), arrowstyle="-|>", mutation_scale=10, color=_INK, shrinkA=1, shrinkB=1
                )
            )
        else:  # note
            ax.text(x, y, payload, ha="left", va="top", fontsize=_NOTE_PT, color=_INK)
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
