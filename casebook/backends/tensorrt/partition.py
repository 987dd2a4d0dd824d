"""What a Torch-TensorRT dry run says about a graph's partition, as ordered segments and a figure.

A `~casebook.backends.tensorrt.coverage.CoverageReport` carries the TensorRT and Torch blocks of the
partition in graph order (``report.blocks``, read by the dry-run worker from the partitioned graph
Torch-TensorRT returned). This module checks them against the report's counts (a change in how
Torch-TensorRT names or counts its blocks then raises instead of drawing a wrong picture) and turns
them into segments, table rows and a figure.

It also turns ``report.analysis`` into the sentence a page prints about where the numbers came from
(a real TensorRT on a GPU, or the labelled stand-in used on machines without one).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..partition import Segment, shorten
from ..partition_figure import draw_partitions
from .coverage import CoverageReport

REAL_ANALYSIS = "tensorrt"


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
            "casebook.backends.tensorrt._dryrun_worker._partition_blocks."
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
        "compile would; **no engine was built in this dry run**, so it does not tell whether "
        "TensorRT accepts each block at build time (a real build, `casebook.backends.tensorrt.engine`, does)."
    )


def partition_figure(
    reports: Mapping[str, CoverageReport], *, title: str = "", notes: bool = True, box_width: float = 1.55
):
    """Draw each report's partition (:func:`partition_segments`) with :func:`draw_partitions`.

    TensorRT engines are green with their operator count; Torch blocks are orange with their nodes.
    """
    partitions = {label: partition_segments(report) for label, report in reports.items()}
    return draw_partitions(partitions, title=title, notes=notes, box_width=box_width)


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
                "runs in Torch": shorten(torch_nodes(report)),
                "converter coverage": f"{report.coverage:.1%}",
                "ops in TensorRT": f"{in_engines:.1%}",
            }
        )
    return rows
