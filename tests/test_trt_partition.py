"""Partition segments, table rows and figure drawn from Torch-TensorRT dry-run reports."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402

from casebook.backends.tensorrt.coverage import CoverageReport, PartitionBlock, coverage_reports  # noqa: E402
from casebook.backends.tensorrt.partition import (  # noqa: E402
    describe_analysis,
    partition_figure,
    partition_rows,
    partition_segments,
    torch_nodes,
)
from casebook.figures import COLUMN_WIDTH_IN, MIN_FONT_PX, smallest_font_px  # noqa: E402

STAND_IN = "stand-in (no GPU: engines were not built)"


def _report(blocks, *, analysis=STAND_IN, total=None) -> CoverageReport:
    """A report as coverage_report builds it from the worker's result.

    ``blocks`` is the partition in graph order: an int is a TensorRT engine with that many ops, a
    list of node names is a Torch block.
    """
    partition = tuple(
        PartitionBlock("tensorrt", f"_run_on_acc_{i}", block)
        if isinstance(block, int)
        else PartitionBlock("torch", f"_run_on_gpu_{i}", len(block), tuple(block))
        for i, block in enumerate(blocks)
    )
    sizes = [b.op_count for b in partition if b.kind == "tensorrt"]
    nodes = [name for b in partition for name in b.nodes]
    total = total or sum(sizes) + len(nodes)
    return CoverageReport(
        analysis=analysis,
        total_ops=total,
        supported_ops=total - 1,
        coverage=(total - 1) / total,
        unsupported_ops={"torch.ops.torchvision.nms.default": 1},
        torch_executed_ops=(),
        trt_engine_count=len(sizes),
        trt_block_sizes=sizes,
        torch_block_count=sum(b.kind == "torch" for b in partition),
        min_block_size=5,
        suggested_min_block_size=max(sizes, default=None),
        text="(the dry run's printed summary; nothing here reads it)",
        to_run_in_torch=tuple(
            f"Node: torch.ops.aten.{n}.default, with layer location: head/{n}" for n in nodes
        ),
        versions={"torch_tensorrt": "2.14.0", "tensorrt": "11.1.0+standin"},
        blocks=partition,
        torch_node_names=tuple(nodes),
    )


def test_torch_block_between_two_engines():
    report = _report([29, ["nms"], 2])
    segments = partition_segments(report)
    assert [(s.kind, s.index, s.op_count, s.nodes) for s in segments] == [
        ("tensorrt", 0, 29, ()),
        ("torch", 1, 1, ("nms",)),
        ("tensorrt", 2, 2, ()),
    ]
    assert torch_nodes(report) == ["nms"]


def test_one_node_per_torch_block_is_assigned_in_order():
    segments = partition_segments(_report([22, ["exp"], 6, ["nms"], 2]))
    assert [s.nodes for s in segments if s.kind == "torch"] == [("exp",), ("nms",)]


def test_each_torch_block_keeps_its_own_nodes():
    """The worker reads each Torch block's nodes from its submodule, so several blocks with several
    nodes each are not ambiguous (the printed summary lists all Torch nodes together)."""
    report = _report([22, ["exp", "nms"], 6, ["index", "index_1"]])
    torch_blocks = [s for s in partition_segments(report) if s.kind == "torch"]
    assert [(s.index, s.op_count, s.nodes) for s in torch_blocks] == [
        (1, 2, ("exp", "nms")),
        (3, 2, ("index", "index_1")),
    ]
    assert torch_nodes(report) == ["exp", "nms", "index", "index_1"]


def test_everything_in_torch():
    (segment,) = partition_segments(_report([["conv", "relu", "nms"]]))
    assert (segment.kind, segment.op_count, segment.nodes) == ("torch", 3, ("conv", "relu", "nms"))


def test_blocks_that_disagree_with_the_counts_raise():
    report = _report([29, ["nms"]])
    broken = CoverageReport(**{**report.__dict__, "trt_block_sizes": [28]})
    with pytest.raises(ValueError, match="format changed"):
        partition_segments(broken)
    unknown_order = CoverageReport(**{**report.__dict__, "torch_block_count": None})
    with pytest.raises(ValueError, match="order of the blocks is unknown"):
        partition_segments(unknown_order)
    global_partitioner = CoverageReport(**{**report.__dict__, "blocks": None})
    with pytest.raises(ValueError, match="order of the blocks is unknown"):
        partition_segments(global_partitioner)


def test_rows_and_figure():
    reports = {
        "default": _report([29, ["nms", "index", "index_1"]]),
        "two blocks": _report([22, ["exp"], 6, ["nms", "index", "index_1", "mul"]]),
    }
    rows = partition_rows(reports)
    assert rows[0]["TensorRT engines"] == 1 and rows[0]["runs in Torch"] == "nms, index, index_1"
    assert rows[1]["runs in Torch"] == "exp, nms, index, index_1, … (5 nodes)"
    assert rows[0]["ops in TensorRT"] == f"{29 / 32:.1%}"
    figure = partition_figure(reports, title="t")
    texts = [t.get_text() for t in figure.axes[0].texts]
    assert "TensorRT engine\n29 ops" in texts and "PyTorch\nnms, index, index_1" in texts
    assert any(t.startswith("PyTorch nodes across these blocks: exp") for t in texts)
    # A block with too many nodes to name is counted in its box and named, per block, in the note.
    assert "PyTorch\n4 nodes" in texts
    assert "PyTorch nodes across these blocks: exp | nms, index, index_1, mul" in texts


DETECTOR_PARTITIONS = {  # the notebook's five settings on TinyDetector
    "min_block_size=5 (default)": [29, ["nms", "index", "index_1"]],
    "min_block_size=1": [29, ["nms"], 2],
    "min_block_size=30": [[f"op_{i}" for i in range(32)]],
    "exp in Torch": [22, ["exp"], 6, ["nms", "index", "index_1"]],
    "exp in Torch, min_block_size=1": [22, ["exp"], 6, ["nms"], 2],
}
LONG_STRIP = {  # more blocks than fit across the column, and a long setting name
    "a setting with a long name, relu and exp in PyTorch, min_block_size=1": [
        3,
        ["exp"],
        4,
        ["nms", "index", "index_1", "mul", "add"],
        5,
        ["sigmoid"],
        2,
        ["relu"],
        9,
    ],
    "defaults": [40],
}


@pytest.mark.parametrize("partitions", [DETECTOR_PARTITIONS, LONG_STRIP], ids=["detector", "long-strip"])
def test_figure_fits_the_column_with_readable_text(partitions):
    reports = {label: _report(blocks) for label, blocks in partitions.items()}
    figure = partition_figure(
        reports, title="TinyDetector: TensorRT engines and PyTorch blocks, in graph order"
    )
    width, _ = figure.get_size_inches()
    assert width <= COLUMN_WIDTH_IN
    figure.canvas.draw()
    drawn = figure.get_tightbbox(figure.canvas.get_renderer())
    assert drawn.x0 >= -0.01 and drawn.x1 <= width + 0.01  # no label or note runs off the figure
    assert smallest_font_px(figure) >= MIN_FONT_PX
    # Every block is drawn, in graph order, whether or not its strip wraps onto a second line.
    boxes = [
        t.get_text()
        for t in figure.axes[0].texts
        if t.get_text().startswith(("TensorRT engine\n", "PyTorch\n"))
    ]
    expected = [
        "TensorRT engine" if isinstance(block, int) else "PyTorch"
        for blocks in partitions.values()
        for block in blocks
    ]
    assert [text.split("\n")[0] for text in boxes] == expected


def test_describe_analysis_says_whether_engines_were_built():
    assert "no engine was built in this dry run" in describe_analysis(_report([8]))
    assert "TensorRT 11.1.0 (no libnvinfer)" in describe_analysis(_report([8]))
    real = _report([8], analysis="tensorrt")
    real = CoverageReport(**{**real.__dict__, "versions": {"torch_tensorrt": "2.14.0", "tensorrt": "11.1.0"}})
    assert "with TensorRT 11.1.0 on this machine's GPU" in describe_analysis(real)


class _NmsHead(torch.nn.Module):
    def forward(self, boxes, scores):
        boxes = boxes * 2.0 + 1.0
        keep = torchvision.ops.nms(boxes, torch.sigmoid(scores), 0.5)
        return boxes[keep] * 3.0


@pytest.mark.slow
def test_segments_of_a_real_dry_run():
    """The blocks are read from Torch-TensorRT's own partitioned graph (one worker, about ten seconds)."""
    torch.manual_seed(0)
    boxes = torch.rand(16, 4)
    boxes[:, 2:] += boxes[:, :2]
    inputs = (boxes, torch.rand(16))
    program = torch.export.export(_NmsHead(), inputs)
    (coarse, fine) = coverage_reports(program, inputs, [{}, {"min_block_size": 1}])
    assert [s.kind for s in partition_segments(fine)] == ["tensorrt", "torch", "tensorrt"]
    assert [s.nodes for s in partition_segments(fine) if s.kind == "torch"] == [("nms",)]
    assert partition_segments(coarse)[-1].kind == "torch"
    assert "nms" in torch_nodes(coarse)
