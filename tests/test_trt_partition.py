"""Partition segments, table rows and figure drawn from Torch-TensorRT dry-run reports."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402

from case_studies.backends.trt_coverage import CoverageReport, coverage_reports  # noqa: E402
from case_studies.trt_partition import (  # noqa: E402
    describe_analysis,
    partition_figure,
    partition_rows,
    partition_segments,
    torch_nodes,
)

STAND_IN = "stand-in (no GPU: engines were not built)"


def _engine(number: int, index: int, ops: int) -> str:
    return (
        f"    TRT Engine #{number} - Submodule name: _run_on_acc_{index}\n"
        "     Engine Inputs: List[Tensor: (64, 4)@float32]\n"
        f"     Number of Operators in Engine: {ops}\n"
        "     Engine Outputs: List[Tensor: (64, 4)@float32]\n    ...\n"
    )


def _report(engines, torch_blocks, nodes, *, analysis=STAND_IN, total=None) -> CoverageReport:
    """A report as coverage_report builds it; ``engines`` is [(submodule index, op count)]."""
    text = "  Graph Structure:\n\n   Inputs: ...\n    ...\n" + "".join(
        _engine(n, i, ops) for n, (i, ops) in enumerate(engines, start=1)
    )
    sizes = [ops for _, ops in engines]
    total = total or sum(sizes) + len(nodes)
    return CoverageReport(
        analysis=analysis,
        total_ops=total,
        supported_ops=total - 1,
        coverage=(total - 1) / total,
        unsupported_ops={"torch.ops.torchvision.nms.default": 1},
        torch_executed_ops=(),
        trt_engine_count=len(engines),
        trt_block_sizes=sizes,
        torch_block_count=torch_blocks,
        min_block_size=5,
        suggested_min_block_size=max(sizes, default=None),
        text=text,
        to_run_in_torch=tuple(
            f"Node: torch.ops.aten.{n}.default, with layer location: head/{n}" for n in nodes
        ),
        versions={"torch_tensorrt": "2.14.0", "tensorrt": "11.1.0+standin"},
    )


def test_torch_block_between_two_engines():
    report = _report([(0, 29), (2, 2)], 1, ["nms"])
    segments = partition_segments(report)
    assert [(s.kind, s.index, s.op_count, s.nodes) for s in segments] == [
        ("tensorrt", 0, 29, ()),
        ("torch", 1, 1, ("nms",)),
        ("tensorrt", 2, 2, ()),
    ]
    assert torch_nodes(report) == ["nms"]


def test_one_node_per_torch_block_is_assigned_in_order():
    segments = partition_segments(_report([(0, 22), (2, 6), (4, 2)], 2, ["exp", "nms"]))
    assert [s.nodes for s in segments if s.kind == "torch"] == [("exp",), ("nms",)]


def test_ambiguous_torch_blocks_are_left_unassigned():
    report = _report([(0, 22), (2, 6)], 2, ["exp", "nms", "index", "index_1"])
    torch_blocks = [s for s in partition_segments(report) if s.kind == "torch"]
    assert [(s.index, s.op_count, s.nodes) for s in torch_blocks] == [(1, None, ()), (3, None, ())]


def test_everything_in_torch():
    (segment,) = partition_segments(_report([], 1, ["conv", "relu", "nms"]))
    assert (segment.kind, segment.op_count, segment.nodes) == ("torch", 3, ("conv", "relu", "nms"))


def test_summary_that_disagrees_with_the_counts_raises():
    report = _report([(0, 29)], 1, ["nms"])
    broken = CoverageReport(**{**report.__dict__, "trt_block_sizes": [28]})
    with pytest.raises(ValueError, match="format changed"):
        partition_segments(broken)
    unknown_order = CoverageReport(**{**report.__dict__, "torch_block_count": None})
    with pytest.raises(ValueError, match="order of the blocks is unknown"):
        partition_segments(unknown_order)


def test_rows_and_figure():
    reports = {
        "default": _report([(0, 29)], 1, ["nms", "index", "index_1"]),
        "ambiguous": _report([(0, 22), (2, 6)], 2, ["exp", "nms", "index", "index_1", "mul"]),
    }
    rows = partition_rows(reports)
    assert rows[0]["TensorRT engines"] == 1 and rows[0]["runs in Torch"] == "nms, index, index_1"
    assert rows[1]["runs in Torch"] == "exp, nms, index, index_1, … (5 nodes)"
    assert rows[0]["ops in TensorRT"] == f"{29 / 32:.1%}"
    figure = partition_figure(reports, title="t")
    texts = [t.get_text() for t in figure.axes[0].texts]
    assert "TensorRT engine\n29 ops" in texts and "PyTorch\nnms, index, index_1" in texts
    assert any(t.startswith("PyTorch nodes across these blocks: exp") for t in texts)


def test_describe_analysis_says_whether_engines_were_built():
    assert "no TensorRT engine was built" in describe_analysis(_report([(0, 8)], 0, []))
    assert "TensorRT 11.1.0 (no libnvinfer)" in describe_analysis(_report([(0, 8)], 0, []))
    real = _report([(0, 8)], 0, [], analysis="tensorrt")
    real = CoverageReport(**{**real.__dict__, "versions": {"torch_tensorrt": "2.14.0", "tensorrt": "11.1.0"}})
    assert "with TensorRT 11.1.0 on this machine's GPU" in describe_analysis(real)


class _NmsHead(torch.nn.Module):
    def forward(self, boxes, scores):
        boxes = boxes * 2.0 + 1.0
        keep = torchvision.ops.nms(boxes, torch.sigmoid(scores), 0.5)
        return boxes[keep] * 3.0


@pytest.mark.slow
def test_segments_of_a_real_dry_run():
    """The summary format parsed here is Torch-TensorRT's own (one worker, about ten seconds)."""
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
