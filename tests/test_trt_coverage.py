"""Pin what Torch-TensorRT's dry run says about known graphs, so a release that changes it is noticed.

Each worker process imports torch and torch_tensorrt (about 10 s on a 2-core machine), so the tests
dry-run several settings per worker (`coverage_reports`) and share the results through fixtures.
Without a GPU the worker runs with stand-ins; the partition facts pinned here do not depend on that.
"""

from __future__ import annotations

import sys
import warnings

import pytest
import torch
import torchvision

from case_studies.backends import trt_coverage
from case_studies.backends._trt_dryrun_worker import STAND_IN_ANALYSIS, make_tensorrt_stand_in
from case_studies.backends.trt_coverage import (
    CoverageReport,
    TensorRTCompileError,
    TorchTensorRTNotInstalledError,
    coverage_report,
    coverage_reports,
)

RELU = "torch.ops.aten.relu.default"
NMS = "torch.ops.torchvision.nms.default"
FULL_COMPILATION_MESSAGE = "require_full_compilation=True was specified, but model is not fully supported"


class NmsHead(torch.nn.Module):
    """Box post-processing around torchvision's NMS, which has no TensorRT converter."""

    def forward(self, boxes: torch.Tensor, scores: torch.Tensor):
        boxes = boxes * 2.0 + 1.0
        scores = torch.sigmoid(scores)
        keep = torchvision.ops.nms(boxes, scores, 0.5)
        return boxes[keep] * 3.0, scores[keep]


@pytest.fixture(scope="module")
def resnet18():
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    return torch.export.export(model, (x,)), (x,)


@pytest.fixture(scope="module")
def nms_head():
    torch.manual_seed(0)
    boxes = torch.rand(16, 4)
    boxes[:, 2:] += boxes[:, :2]
    inputs = (boxes, torch.rand(16))
    return torch.export.export(NmsHead(), inputs), inputs


@pytest.fixture(scope="module")
def resnet18_reports(resnet18):
    """Default settings, then ReLU forced to Torch (as an OpOverload, then as its name) at two block sizes."""
    modules_before = set(sys.modules)
    cuda_current_device = torch.cuda.current_device
    reports = coverage_reports(
        *resnet18,
        [
            {},
            {"torch_executed_ops": {torch.ops.aten.relu.default}},
            {"torch_executed_ops": {RELU}, "min_block_size": 1},
        ],
    )
    # The stand-ins stayed in the worker process.
    assert not {"tensorrt", "torch_tensorrt"} & (set(sys.modules) - modules_before)
    assert not getattr(sys.modules.get("tensorrt"), "__casebook_stand_in__", False)
    assert torch.cuda.current_device is cuda_current_device
    return reports


@pytest.fixture(scope="module")
def nms_reports(nms_head):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reports = coverage_reports(
            *nms_head,
            [{"min_block_size": 1}, {"min_block_size": 1, "torch_executed_ops": {"aten.sigmoid.default"}}],
        )
    return reports, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def test_resnet18_is_one_tensorrt_engine(resnet18_reports):
    report = resnet18_reports[0]

    assert isinstance(report, CoverageReport)
    if not torch.cuda.is_available():
        assert report.analysis == STAND_IN_ANALYSIS
        assert report.versions["tensorrt"].endswith("+standin")
    assert report.min_block_size == 5
    assert report.fully_convertible
    assert report.trt_engine_count == 1
    assert report.coverage == 1.0 and report.unsupported_ops == {}
    assert report.trt_block_sizes == [report.total_ops]
    assert report.torch_block_count == 0
    assert report.suggested_min_block_size == report.total_ops
    assert "Dry-Run Results for Graph" in report.text
    assert set(report.to_frame()["support"]) == {"converter"}


def test_relu_in_torch_splits_resnet18_and_min_block_size_drops_small_blocks(resnet18_reports):
    _, coarse, fine = resnet18_reports

    for report in (coarse, fine):
        assert report.unsupported_ops == {RELU: 17}
        assert report.torch_executed_ops == (RELU,)
        assert not report.fully_convertible and report.coverage < 1
    # Every ReLU cuts the graph: 17 cuts, 18 TensorRT blocks, 17 Torch blocks in between.
    assert fine.trt_engine_count == 18 and fine.torch_block_count == 17
    # min_block_size=5 drops the 3- and 4-op blocks, which then run in Torch too.
    assert 1 < coarse.trt_engine_count < fine.trt_engine_count
    assert all(size >= 5 for size in coarse.trt_block_sizes)
    assert min(fine.trt_block_sizes) < 5
    frame = coarse.to_frame()
    assert frame.loc[frame["op"] == RELU, "support"].item() == "torch_executed_ops"


def test_nms_has_no_converter(nms_reports):
    report = nms_reports[0][0]

    if not torch.cuda.is_available():
        assert report.analysis == STAND_IN_ANALYSIS
    assert report.unsupported_ops.get(NMS, 0) >= 1
    assert report.coverage < 1 and not report.fully_convertible
    assert report.trt_engine_count == 2 and report.torch_block_count == 1
    frame = report.to_frame()
    assert frame.loc[frame["op"] == NMS, "support"].item() == "no converter"
    assert frame["op"][0] == NMS


def test_misnamed_torch_executed_ops_are_ignored_with_a_warning(nms_reports):
    (plain, misnamed), messages = nms_reports

    assert any("matched no node" in m and "aten.sigmoid.default" in m for m in messages)
    assert misnamed.supported_op_counts == plain.supported_op_counts
    assert misnamed.trt_block_sizes == plain.trt_block_sizes


def test_require_full_compilation_fails_on_nms(nms_head):
    with pytest.raises(TensorRTCompileError, match=FULL_COMPILATION_MESSAGE) as caught:
        coverage_report(*nms_head, require_full_compilation=True)
    assert caught.value.original_type == "AssertionError"
    assert caught.value.original_message == FULL_COMPILATION_MESSAGE


def test_missing_torch_tensorrt_says_make_build(nms_head, monkeypatch):
    real_find_spec = trt_coverage.importlib.util.find_spec
    monkeypatch.setattr(
        trt_coverage.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "torch_tensorrt" else real_find_spec(name, *a),
    )
    with pytest.raises(TorchTensorRTNotInstalledError, match="make build"):
        coverage_report(*nms_head)


def test_unknown_setting_is_rejected(nms_head):
    with pytest.raises(TypeError, match="min_blocksize"):
        coverage_reports(*nms_head, [{"min_blocksize": 1}])


def test_tensorrt_stand_in_is_labelled_and_inert():
    trt = make_tensorrt_stand_in("11.1.0")

    assert trt.__casebook_stand_in__ and trt.__version__ == "11.1.0+standin"
    assert trt.DataType.FLOAT is trt.DataType.FLOAT and trt.DataType.FLOAT != trt.DataType.HALF
    assert isinstance(trt.DataType.FLOAT, trt.DataType)
    assert "stand-in" in repr(trt.DataType.FLOAT)

    class Logger(trt.ILogger):  # torch_tensorrt subclasses TensorRT's interfaces at import time
        pass

    Logger()
    with pytest.raises(AttributeError):
        trt.Builder(Logger()).create_network()  # nothing can be built
    assert trt.__casebook_touched__[:2] == ["DataType", "DataType.FLOAT"]
