"""Pin what Torch-TensorRT's dry run says about known graphs, so a release that changes it is noticed.

The first dry run of a process starts the dry-run server, which imports torch and torch_tensorrt
(about 10 s on a 2-core machine); later ones are children forked from it. The tests still dry-run
several settings per worker (`coverage_reports`) and share the results through fixtures.
Without a GPU the worker runs with stand-ins; the partition facts pinned here do not depend on that.
"""

from __future__ import annotations

import gc
import importlib
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
import torchvision
from custom_op_module import scale_op_module

from casebook.backends.tensorrt import coverage as trt_coverage
from casebook.backends.tensorrt._dryrun_worker import STAND_IN_ANALYSIS, make_tensorrt_stand_in
from casebook.backends.tensorrt.coverage import (
    CoverageAnalysisError,
    CoverageReport,
    PartitionBlock,
    TensorRTCompileError,
    TorchTensorRTNotInstalledError,
    coverage_report,
    coverage_reports,
    coverage_reports_by_program,
    start_coverage_reports_by_program,
)
from casebook.isolation import run_forked
from casebook.models.stand_ins import Boxes, Instances, register_pytree_nodes

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


class InstancesHead(torch.nn.Module):
    """Returns a detectron2-style `Instances`: a custom pytree class the worker must register to load."""

    def forward(self, boxes: torch.Tensor, scores: torch.Tensor):
        return Instances((32, 32), pred_boxes=Boxes(boxes * 2.0 + 1.0), scores=torch.sigmoid(scores) * 3.0)


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


@pytest.mark.slow
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
    assert report.blocks == (PartitionBlock("tensorrt", "_run_on_acc_0", report.total_ops),)
    assert report.torch_node_names == ()
    assert report.suggested_min_block_size == report.total_ops
    assert "Dry-Run Results for Graph" in report.text
    assert set(report.to_frame()["support"]) == {"converter"}


@pytest.mark.slow
def test_relu_in_torch_splits_resnet18_and_min_block_size_drops_small_blocks(resnet18_reports):
    _, coarse, fine = resnet18_reports

    for report in (coarse, fine):
        assert report.unsupported_ops == {RELU: 17}
        assert report.torch_executed_ops == (RELU,)
        assert not report.fully_convertible and report.coverage < 1
    # Every ReLU cuts the graph: 17 cuts, 18 TensorRT blocks, 17 Torch blocks in between.
    assert fine.trt_engine_count == 18 and fine.torch_block_count == 17
    # In graph order the blocks alternate, each Torch block holding one ReLU.
    assert [b.kind for b in fine.blocks] == ["tensorrt", "torch"] * 17 + ["tensorrt"]
    assert all(b.op_count == 1 and b.nodes[0].startswith("relu") for b in fine.blocks if b.kind == "torch")
    # min_block_size=5 drops the 3- and 4-op blocks, which then run in Torch too.
    assert 1 < coarse.trt_engine_count < fine.trt_engine_count
    assert all(size >= 5 for size in coarse.trt_block_sizes)
    assert min(fine.trt_block_sizes) < 5
    frame = coarse.to_frame()
    assert frame.loc[frame["op"] == RELU, "support"].item() == "torch_executed_ops"


@pytest.mark.slow
def test_nms_has_no_converter(nms_reports):
    report = nms_reports[0][0]

    if not torch.cuda.is_available():
        assert report.analysis == STAND_IN_ANALYSIS
    assert report.unsupported_ops.get(NMS, 0) >= 1
    assert report.coverage < 1 and not report.fully_convertible
    assert report.trt_engine_count == 2 and report.torch_block_count == 1
    assert [(b.kind, b.name) for b in report.blocks] == [
        ("tensorrt", "_run_on_acc_0"),
        ("torch", "_run_on_gpu_1"),
        ("tensorrt", "_run_on_acc_2"),
    ]
    assert report.blocks[1].nodes == ("nms",) and report.torch_node_names == ("nms",)
    assert [b.op_count for b in report.blocks if b.kind == "tensorrt"] == report.trt_block_sizes
    frame = report.to_frame()
    assert frame.loc[frame["op"] == NMS, "support"].item() == "no converter"
    assert frame["op"][0] == NMS


@pytest.mark.slow
def test_misnamed_torch_executed_ops_are_ignored_with_a_warning(nms_reports):
    (plain, misnamed), messages = nms_reports

    assert any("matched no node" in m and "aten.sigmoid.default" in m for m in messages)
    assert misnamed.supported_op_counts == plain.supported_op_counts
    assert misnamed.trt_block_sizes == plain.trt_block_sizes


@pytest.mark.slow
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


@pytest.fixture(scope="module")
def instances_head():
    register_pytree_nodes()
    torch.manual_seed(0)
    inputs = (torch.rand(8, 4), torch.rand(8))
    return torch.export.export(InstancesHead(), inputs, strict=False), inputs


@pytest.mark.slow
def test_custom_pytree_output_needs_its_registration_in_the_worker(instances_head):
    with pytest.raises(CoverageAnalysisError, match="phase 'load'") as caught:
        coverage_report(*instances_head, min_block_size=1)
    message = str(caught.value)
    assert "casebook.models.stand_ins.Instances in pytree is not registered" in message
    assert "pytree_registrations=" in message and "'casebook.models.stand_ins.Instances'" in message


@pytest.mark.slow
def test_with_its_registration_the_worker_loads_instances_and_torch_tensorrt_refuses_them(instances_head):
    """Loaded, the program reaches Torch-TensorRT, whose constant folding then rebuilds the outputs
    from placeholder objects (torch._inductor's ConstantFolder runs with output processing on), and
    `Boxes` rejects a placeholder: Torch-TensorRT cannot take an `Instances` output (torch 2.14.1)."""
    with pytest.raises(TensorRTCompileError) as caught:
        coverage_report(*instances_head, min_block_size=1, pytree_registrations=[register_pytree_nodes])
    assert caught.value.result["phase"] == "compile"
    assert caught.value.original_type == "AttributeError"
    assert caught.value.original_message == "'object' object has no attribute 'dim'"
    assert "constant_fold" in caught.value.stderr_tail and "boxes_unflatten" in caught.value.stderr_tail


DETECTIONS_MODULE = """
import dataclasses

import torch


@dataclasses.dataclass
class Detections:
    boxes: torch.Tensor
    scores: torch.Tensor


def register():
    if Detections not in torch.utils._pytree.SUPPORTED_NODES:
        torch.export.register_dataclass(Detections, serialized_type_name="casebook_test_detections.Detections")
"""


@pytest.mark.slow
def test_pytree_registrations_named_as_strings_reach_the_worker(tmp_path, monkeypatch):
    """A dataclass output, whose constructor takes anything, gets through Torch-TensorRT's dry run."""
    (tmp_path / "casebook_test_detections.py").write_text(DETECTIONS_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the worker's path; it adds the repository
    detections = importlib.import_module("casebook_test_detections")
    detections.register()

    class DetectionsHead(torch.nn.Module):
        def forward(self, boxes, scores):
            return detections.Detections(boxes * 2.0 + 1.0, torch.sigmoid(scores) * 3.0)

    inputs = (torch.rand(8, 4), torch.rand(8))
    program = torch.export.export(DetectionsHead(), inputs, strict=False)
    report = coverage_report(
        program, inputs, min_block_size=1, pytree_registrations=["casebook_test_detections:register"]
    )
    assert report.fully_convertible and report.coverage == 1.0
    assert [b.kind for b in report.blocks] == ["tensorrt"]


def test_pytree_registrations_must_be_importable_by_name(instances_head):
    with pytest.raises(ValueError, match="importable module"):
        coverage_report(*instances_head, pytree_registrations=[lambda: None])
    with pytest.raises(ValueError, match="has no attribute 'register_nodes'"):
        coverage_report(*instances_head, pytree_registrations=["casebook.models.stand_ins:register_nodes"])


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


@pytest.mark.slow
def test_before_load_registers_fake_kernels_the_dry_run_needs(tmp_path, monkeypatch):
    """Torch-TensorRT traces the program again: a custom operator's module is not enough in the
    worker, its fake kernel must be registered there too (`before_load`)."""
    ops = scale_op_module(tmp_path, "casebook_test_ops", monkeypatch)
    ops.register_fake()

    class ScaleHead(torch.nn.Module):
        def forward(self, x):
            return ops.scale(x.relu()) + 1

    inputs = (torch.rand(8, 4),)
    program = torch.export.export(ScaleHead(), inputs)
    with pytest.raises(TensorRTCompileError, match="There was no fake impl registered"):
        coverage_report(program, inputs, min_block_size=1, import_modules=["casebook_test_ops"])
    report = coverage_report(
        program,
        inputs,
        min_block_size=1,
        import_modules=["casebook_test_ops"],
        before_load=["casebook_test_ops:register_fake"],
    )
    assert "torch.ops.casebook_test_ops.scale.default" in report.unsupported_ops
    with pytest.raises(ValueError, match="importable module"):
        coverage_report(program, inputs, before_load=[lambda: None])


@pytest.mark.slow
def test_several_programs_share_one_worker(resnet18, nms_head, resnet18_reports, nms_reports):
    reports = coverage_reports_by_program({"resnet18": resnet18, "nms head": nms_head}, min_block_size=1)
    assert list(reports) == ["resnet18", "nms head"]
    # The same partitions as one program per worker (resnet18 is one block at any block size).
    assert reports["resnet18"].trt_block_sizes == resnet18_reports[0].trt_block_sizes
    alone = nms_reports[0][0]
    assert reports["nms head"].unsupported_ops == alone.unsupported_ops == {NMS: 1}
    assert reports["nms head"].trt_block_sizes == alone.trt_block_sizes


@pytest.mark.slow
def test_several_programs_name_the_one_that_failed(resnet18, nms_head):
    with pytest.raises(TensorRTCompileError, match=r"\(program 'nms head'\)"):
        coverage_reports_by_program(
            {"resnet18": resnet18, "nms head": nms_head}, require_full_compilation=True
        )


@pytest.mark.slow
def test_a_started_dry_run_returns_before_its_worker_ends(resnet18, nms_head, nms_reports):
    program, inputs = nms_head
    pending = start_coverage_reports_by_program({"nms head": (program, inputs)}, min_block_size=1)
    assert not pending.done()  # loading and partitioning take a second, even in a served child
    del program  # saved before start returned
    reports = pending.result()
    assert pending.done()
    assert reports["nms head"].trt_block_sizes == nms_reports[0][0].trt_block_sizes


@pytest.mark.slow
def test_a_started_dry_run_that_is_dropped_stops_its_worker(nms_head):
    pending = start_coverage_reports_by_program({"nms head": nms_head})
    process, files = pending._run.process, Path(pending._run.tmp.name)
    del pending
    gc.collect()
    assert process.poll() is not None and not files.exists()


@pytest.mark.slow
def test_a_saved_program_is_dry_run_from_its_file(nms_head, nms_reports, tmp_path):
    program, inputs = nms_head
    path = tmp_path / "nms_head.pt2"
    torch.export.save(program, str(path))
    reports = coverage_reports_by_program({"from file": (path, inputs)}, min_block_size=1)
    alone = nms_reports[0][0]
    assert reports["from file"].unsupported_ops == alone.unsupported_ops
    assert reports["from file"].trt_block_sizes == alone.trt_block_sizes


def test_a_missing_program_file_is_named_before_any_worker_starts(nms_head, tmp_path):
    _, inputs = nms_head
    with pytest.raises(
        FileNotFoundError, match=r"no saved program at .*missing\.pt2: pass an ExportedProgram"
    ):
        coverage_reports_by_program({"missing": (tmp_path / "missing.pt2", inputs)})


def test_several_programs_need_at_least_one():
    with pytest.raises(ValueError, match="needs at least one program"):
        coverage_reports_by_program({})


def test_the_cause_torch_only_logs_is_read_from_the_worker_log():
    from casebook.backends.tensorrt.coverage import _cause_in_log

    log = (
        "W1128 17:33:44.811000 923 .venv/lib/python3.11/site-packages/torch/export/__init__.py:403]     raise X(\n"
        "W1128 17:33:44.811000 923 .venv/lib/python3.11/site-packages/torch/export/__init__.py:403] "
        "NotImplementedError: Deserializing casebook.models.stand_ins.Instances in pytree is not registered.\n"
        "some other line\n"
    )
    assert _cause_in_log(log) == (
        "NotImplementedError: Deserializing casebook.models.stand_ins.Instances in pytree is not registered."
    )
    assert _cause_in_log("W1128 17:33:44.811000 923 a.py:1] a plain warning\n") is None


# The dry-run server (`_dryrun_worker.serve`): set up once per process, a forked child per dry run.


@pytest.mark.slow
def test_a_dry_run_after_the_first_is_served_by_the_process_set_up_once(nms_head, nms_reports):
    coverage_report(*nms_head, min_block_size=1)  # starts the server, if no test before did
    server = trt_coverage._SERVER["server"]
    pending = start_coverage_reports_by_program({"nms head": nms_head}, min_block_size=1)
    assert isinstance(pending._run.process, trt_coverage._ServedRun)
    assert pending.result()["nms head"].trt_block_sizes == nms_reports[0][0].trt_block_sizes
    assert trt_coverage._SERVER["server"] is server and server.process.poll() is None and not server.busy


@pytest.mark.slow
def test_a_dry_run_that_comes_while_the_server_is_busy_gets_a_fresh_worker_and_the_same_report(nms_head):
    served = start_coverage_reports_by_program({"nms head": nms_head}, min_block_size=1)
    fresh = start_coverage_reports_by_program({"nms head": nms_head}, min_block_size=1)
    assert isinstance(served._run.process, trt_coverage._ServedRun)
    assert isinstance(fresh._run.process, subprocess.Popen)
    served_report, fresh_report = served.result()["nms head"], fresh.result()["nms head"]
    for field in ("analysis", "stand_ins", "unsupported_ops", "supported_op_counts", "blocks", "text"):
        assert getattr(served_report, field) == getattr(fresh_report, field), field


@pytest.mark.slow
def test_a_served_dry_run_starts_without_the_registrations_of_the_one_before(instances_head):
    with pytest.raises(TensorRTCompileError):  # registered: it loads, and Torch-TensorRT refuses it
        coverage_report(*instances_head, min_block_size=1, pytree_registrations=[register_pytree_nodes])
    with pytest.raises(CoverageAnalysisError, match="phase 'load'"):  # the next child never registered
        coverage_report(*instances_head, min_block_size=1)


@pytest.mark.slow
def test_a_served_dry_run_past_its_time_is_stopped_and_the_server_serves_the_next(nms_head, nms_reports):
    coverage_report(*nms_head, min_block_size=1)
    server = trt_coverage._SERVER["server"]
    with pytest.raises(CoverageAnalysisError, match="did not finish within 0.01 s"):
        coverage_report(*nms_head, min_block_size=1, timeout_s=0.01)
    report = coverage_report(*nms_head, min_block_size=1)
    assert trt_coverage._SERVER["server"] is server
    assert report.trt_block_sizes == nms_reports[0][0].trt_block_sizes


def test_a_forked_child_does_not_use_its_parents_server(tmp_path, monkeypatch):
    monkeypatch.setitem(trt_coverage._SERVER, "server", _PretendServer())
    forked = run_forked(lambda: trt_coverage._start_served(tmp_path, os.environ), timeout_s=60)
    assert forked.ok and forked.value is None


class _PretendServer:
    """Stands in for a server started by this process (only its owner is read)."""

    owner = os.getpid()
    busy = False

    def close(self):  # pragma: no cover - a forked child never closes it
        raise AssertionError("closed the parent's server")
