"""Real TensorRT engine builds (`casebook.backends.tensorrt.engine`), on this machine, with what it has.

Without a GPU the builds take Torch-TensorRT for RTX (installed by `make install`, TENSORRT=rtx);
each build is a worker process of its own (about 10 s of start-up), so the models are tiny and each
fixture builds once per module.
"""

from __future__ import annotations

import pytest
import torch
import torchvision
from custom_op_module import scale_op_module
from torch import nn
from torch.export import Dim

from casebook.backends.tensorrt import engine as trt_engine
from casebook.backends.tensorrt.engine import (
    EngineBuildError,
    EngineCompileError,
    Profile,
    TensorRTForRTXMissingError,
    build_engines,
    start_engine_builds,
)

NMS = "torch.ops.torchvision.nms.default"
NONZERO = "torch.ops.aten.nonzero.default"


class SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        return self.head(torch.relu(self.conv(x)).mean((2, 3)))


class NonzeroNet(nn.Module):
    """A convolution, then nonzero: TensorRT for RTX has no nonzero (it needs a plugin)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        return y.sum(), (y > 0.5).nonzero()


class NmsNet(nn.Module):
    def forward(self, boxes, scores):
        keep = torchvision.ops.nms(boxes * 2 + 1, scores.sigmoid(), 0.5)
        return boxes[keep]


@pytest.fixture(scope="module")
def small_program():
    torch.manual_seed(0)
    example = torch.randn(2, 3, 16, 16)
    batch = Dim("batch", min=1, max=8)
    return torch.export.export(SmallNet().eval(), (example,), dynamic_shapes=({0: batch},)), example


@pytest.fixture(scope="module")
def dynamic_build(small_program, tmp_path_factory):
    program, example = small_program
    profile = Profile((1, 3, 16, 16), (4, 3, 16, 16), (8, 3, 16, 16))
    # min_block_size=1: the net has fewer ops than the default minimum of 5 for a TensorRT block.
    return build_engines(
        program, (example,), profiles=[profile], min_block_size=1, engine_dir=tmp_path_factory.mktemp("small")
    )


@pytest.mark.slow
def test_a_real_engine_is_built_and_written(dynamic_build):
    build = dynamic_build
    assert build.versions["tensorrt_package"] == ("tensorrt" if torch.cuda.is_available() else "tensorrt_rtx")
    assert [b.status for b in build.blocks] == ["built"] and build.failed == ()
    (engine,) = build.engines
    assert engine.engine_path.is_file() and engine.engine_path.stat().st_size == engine.engine_bytes > 10_000
    assert engine.build_log.is_file() and engine.seconds > 0
    # TensorRT's own layer list, read from the build log (detailed profiling verbosity).
    assert engine.layers and all(layer.name and layer.type for layer in engine.layers)
    assert set(engine.layer_dtypes()) <= {"Float", "Int32", "Int64", "Bool"}  # a float32 model
    assert engine.ops["torch.ops.aten.convolution.default"] == 1
    assert 0 < build.peak_rss_mb < 6 * 1024  # the budget per build
    if not torch.cuda.is_available():
        assert build.stand_ins[0].startswith("torch.cuda.current_device")
        assert build.settings["offload_module_to_cpu"] == "True"
    assert "1 of 1 TensorRT blocks built" in str(build)
    assert build.to_frame().loc[engine.name, "status"] == "built"


@pytest.mark.slow
def test_the_engine_profile_takes_min_and_max_from_the_profile_and_opt_from_the_export(dynamic_build):
    """Torch-TensorRT 2.14.0 builds a block's profile from the program's symbols: min and max come
    from the Profile given, opt from the size the program was exported with (batch 2), not the
    Profile's opt (4). This is the shape the interpreter hands to TensorRT's set_shape."""
    (profile,) = dynamic_build.engines[0].profile
    assert (profile.min, profile.opt, profile.max) == ((1, 3, 16, 16), (2, 3, 16, 16), (8, 3, 16, 16))
    assert not profile.static and str(profile) == "x min [1, 3, 16, 16] opt [2, 3, 16, 16] max [8, 3, 16, 16]"


@pytest.mark.slow
def test_a_profile_wider_than_the_program_is_refused(small_program, tmp_path):
    program, example = small_program
    too_wide = Profile((1, 3, 16, 16), (4, 3, 16, 16), (32, 3, 16, 16))
    with pytest.raises(EngineCompileError, match="exceeds the exported program's max") as caught:
        build_engines(program, (example,), profiles=[too_wide], engine_dir=tmp_path)
    assert caught.value.original_type == "ValueError" and caught.value.build.blocks == ()
    assert "exceeds the exported program's max" in caught.value.traceback.splitlines()[-1]


@pytest.fixture(scope="module")
def nonzero_program():
    example = torch.randn(1, 3, 16, 16)
    return torch.export.export(NonzeroNet().eval(), (example,)), example


def test_a_failing_block_is_reported_and_the_build_goes_on(nonzero_program, tmp_path):
    program, example = nonzero_program
    build = build_engines(program, (example,), min_block_size=1, engine_dir=tmp_path)
    (failed,) = build.failed
    assert failed.error_type == "NotImplementedError"
    assert "only available in non TensorRT-RTX environments" in failed.error_message
    assert failed.ops[NONZERO] == 1 and failed.engine_path is None
    node, target = failed.failing_node
    assert node.startswith("nonzero") and target == "aten.nonzero.default"
    assert failed.builder_errors() == []  # a converter refused it: the builder never ran


def test_without_keep_going_the_first_failure_raises(nonzero_program, tmp_path):
    program, example = nonzero_program
    with pytest.raises(EngineCompileError, match="non TensorRT-RTX environments") as caught:
        build_engines(program, (example,), min_block_size=1, keep_going=False, engine_dir=tmp_path)
    assert caught.value.original_type == "NotImplementedError"
    assert [b.status for b in caught.value.build.blocks] == ["failed"]


def test_torch_executed_ops_moves_the_op_out_and_the_engines_build(nonzero_program, tmp_path):
    program, example = nonzero_program
    build = build_engines(
        program, (example,), min_block_size=1, torch_executed_ops={NONZERO}, engine_dir=tmp_path
    )
    assert build.failed == () and len(build.engines) >= 1
    assert any(b.ops.get(NONZERO) for b in build.torch_blocks)


def test_nms_runs_in_pytorch_and_the_blocks_around_it_are_engines(tmp_path):
    boxes = torch.rand(16, 4) * 10
    boxes[:, 2:] += boxes[:, :2]
    program = torch.export.export(NmsNet(), (boxes, torch.randn(16)))
    build = build_engines(program, (boxes, torch.randn(16)), min_block_size=1, engine_dir=tmp_path)
    kinds = [(b.kind, b.status) for b in build.blocks]
    assert ("torch", "pytorch") in kinds and build.failed == ()
    (nms_block,) = [b for b in build.torch_blocks if NMS in b.ops]
    # The block after nms takes nms's output, whose length is data-dependent: its profile has a range.
    after = build.blocks[build.blocks.index(nms_block) + 1]
    assert after.status == "built" and any(not p.static for p in after.profile)


def test_the_compiled_module_can_be_saved(small_program, tmp_path):
    program, example = small_program
    build = build_engines(
        program,
        (example,),
        save_module=True,
        save_formats=["exported_program"],
        min_block_size=1,
        engine_dir=tmp_path,
    )
    assert build.module_path == tmp_path.resolve() / "module.pt" and build.module_path.stat().st_size > 0
    if not torch.cuda.is_available():
        # torch_tensorrt.save needs the engine set up in TensorRT's runtime, which needs a GPU.
        saved = build.saved["exported_program"]
        assert not saved["ok"] and "references nonexistent attribute _run_on_acc_0_engine" in saved["message"]


def test_unknown_save_formats_are_refused(small_program):
    program, example = small_program
    with pytest.raises(ValueError, match="unknown save_formats \\['onnx'\\]"):
        build_engines(program, (example,), save_formats=["onnx"])
    with pytest.raises(TypeError, match="not a string"):
        build_engines(program, (example,), save_formats="executorch")


# Bad input: each gets a clear error before any worker starts.


def test_one_profile_per_input(small_program):
    program, example = small_program
    with pytest.raises(ValueError, match="1 example inputs: give one Profile per input"):
        build_engines(program, (example,), profiles=[])
    with pytest.raises(TypeError, match="must be a casebook.backends.tensorrt.engine.Profile"):
        build_engines(program, (example,), profiles=[(1, 3, 16, 16)])


def test_a_profile_must_be_ordered_and_of_one_rank():
    with pytest.raises(ValueError, match="order the three shapes"):
        Profile((4, 3), (2, 3), (8, 3))
    with pytest.raises(ValueError, match="same rank"):
        Profile((1, 3), (2, 3), (8, 3, 1))
    with pytest.raises(TypeError, match="torch.float16"):
        Profile((1,), (2,), (3,), dtype="float16")


@pytest.mark.parametrize("name", ["enabled_precisions", "use_explicit_typing", "dryrun"])
def test_removed_or_misplaced_settings_are_refused(small_program, name):
    program, example = small_program
    with pytest.raises(TypeError, match=f"'{name}' is not a build setting here"):
        build_engines(program, (example,), **{name: True})


def test_a_missing_rtx_install_names_the_make_variable(small_program, monkeypatch, tmp_path):
    program, example = small_program
    monkeypatch.setattr(trt_engine, "installed_distribution", lambda: None)
    with pytest.raises(TensorRTForRTXMissingError, match="make install TENSORRT=rtx"):
        build_engines(program, (example,))
    monkeypatch.undo()
    if not torch.cuda.is_available():
        # An empty folder where Torch-TensorRT for RTX should be.
        monkeypatch.setenv("CASEBOOK_TENSORRT_RTX", str(tmp_path))
        with pytest.raises(TensorRTForRTXMissingError, match=f"not in {tmp_path}.*CASEBOOK_TENSORRT_RTX"):
            build_engines(program, (example,))


@pytest.mark.slow
def test_builds_started_together_give_what_each_build_gives(small_program, nonzero_program, tmp_path):
    program, example = small_program
    other, other_example = nonzero_program
    pending = start_engine_builds(
        {
            "small": (program, (example,), {"min_block_size": 1}),
            "nonzero": (other, (other_example,), {"min_block_size": 1}),
            "nonzero moved": (
                other,
                (other_example,),
                {"min_block_size": 1, "torch_executed_ops": {NONZERO}},
            ),
        },
        engine_root=tmp_path,
    )
    builds = pending.result()
    assert pending.done() and list(builds) == ["small", "nonzero", "nonzero moved"]
    assert [(len(b.engines), len(b.failed)) for b in builds.values()] == [(1, 0), (0, 1), (1, 0)]
    # the two builds of one program went to one worker: the second took the first's decompositions
    assert [b.decompositions for b in builds.values()] == ["run", "run", "reused"]
    assert builds["small"].engines[0].engine_path.parent == tmp_path / "0"
    assert pending.result() == builds  # collected once: the workers' folders are gone
    assert list(pending.result(["nonzero moved", "small"])) == ["nonzero moved", "small"]
    with pytest.raises(KeyError, match="no build labelled 'other'"):
        pending.result(["other"])
    assert not any(request.tmp_dir.exists() for request in pending._requests.values())


@pytest.mark.slow
def test_the_first_builds_can_be_collected_while_the_others_build(small_program, tmp_path):
    program, example = small_program
    one = (program, (example,), {"min_block_size": 1})
    pending = start_engine_builds({"a": one, "b": one, "c": one}, jobs=1, engine_root=tmp_path)
    first = pending.result(["a"])
    assert list(first) == ["a"] and not first["a"].failed
    assert pending._requests["c"].tmp_dir.exists()  # not every build collected yet: the files stay
    assert list(pending.result()) == ["a", "b", "c"]
    assert not any(request.tmp_dir.exists() for request in pending._requests.values())


@pytest.mark.slow
def test_an_error_in_builds_started_together_names_its_label(small_program, tmp_path):
    program, example = small_program
    too_wide = Profile((1, 3, 16, 16), (4, 3, 16, 16), (32, 3, 16, 16))
    pending = start_engine_builds(
        {"too wide": (program, (example,), {"profiles": [too_wide]})}, engine_root=tmp_path
    )
    with pytest.raises(
        EngineCompileError, match=r"^\[too wide\] torch_tensorrt.dynamo.compile raised ValueError"
    ):
        pending.result()


@pytest.mark.slow
def test_a_build_past_its_time_stops_its_worker_and_a_fresh_one_takes_the_next(small_program, tmp_path):
    program, example = small_program
    one = (program, (example,), {"min_block_size": 1})
    pending = start_engine_builds(
        {"first": one, "slow": (program, (example,), {"min_block_size": 1, "timeout_s": 0.1}), "after": one},
        jobs=1,
        engine_root=tmp_path,
    )
    with pytest.raises(EngineBuildError, match=r"^\[slow\] the engine build did not finish within 0.1 s"):
        pending.result()
    # one worker built "first", was stopped during "slow", and a new one built "after"
    assert list((tmp_path / "0").glob("*.engine")) and list((tmp_path / "2").glob("*.engine"))


def test_builds_started_together_refuse_bad_arguments(small_program):
    program, example = small_program
    with pytest.raises(ValueError, match="at least one build"):
        start_engine_builds({})
    with pytest.raises(ValueError, match="jobs must be at least 1"):
        start_engine_builds({"a": (program, (example,), {})}, jobs=0)
    with pytest.raises(TypeError, match=r"builds\['a'\] must be \(program, example inputs, keywords\)"):
        start_engine_builds({"a": (program, (example,))})
    with pytest.raises(TypeError, match="load a saved program with torch.export.load first"):
        start_engine_builds({"a": ("program.pt2", (example,), {})})


def test_a_build_counts_its_refusals_by_catalog_entry_and_the_ops_in_its_engines(tmp_path):
    def block(name, status, ops, error_type=None, message=None):
        kind = "torch" if status == "pytorch" else "tensorrt"
        return trt_engine.Block(kind, name, ops, status, error_type=error_type, error_message=message)

    nonzero = "This is only available in non TensorRT-RTX environments, currently running in TensorRT-RTX"
    build = trt_engine.EngineBuild(
        blocks=(
            block("_run_on_acc_0", "built", {"conv": 6}),
            block(
                "_run_on_gpu_1", "pytorch", {"torch.ops.torchvision.nms.default": 1, "_operator.getitem": 2}
            ),
            block("_run_on_acc_2", "failed", {"nonzero": 1, "gt": 2}, "NotImplementedError", nonzero),
            block("_run_on_acc_4", "failed", {"add": 1}, "NotImplementedError", nonzero),
            block("_run_on_acc_6", "failed", {"mul": 1}, "RuntimeError", "something new"),
        ),
        versions={},
        stand_ins=(),
        settings={},
        seconds=1.0,
        peak_rss_mb=1.0,
        engine_dir=tmp_path,
    )
    assert build.refusals() == {"not in the catalog": 1, "tensorrt-rtx-nonzero": 2}
    assert build.ops_in_engines == 6 / 14
    assert build.ops_in_pytorch() == {"nms": 1, "getitem": 2, "nonzero": 1, "gt": 2, "add": 1, "mul": 1}


@pytest.mark.slow
def test_a_worker_past_its_time_is_stopped_and_the_next_build_gets_a_fresh_one(small_program, tmp_path):
    program, example = small_program
    build_engines(program, (example,), min_block_size=1)  # a warm worker builds this in about a second
    warm = trt_engine._SHARED_WORKER["worker"]
    with pytest.raises(EngineBuildError, match="did not finish within 0.05 s"):
        build_engines(program, (example,), timeout_s=0.05, engine_dir=tmp_path)
    assert "worker" not in trt_engine._SHARED_WORKER and warm._process.poll() is not None
    assert build_engines(program, (example,), min_block_size=1).engines
    with pytest.raises(ValueError, match="timeout_s must be positive"):
        build_engines(program, (example,), timeout_s=0)


def test_a_builder_failure_is_read_from_the_build_log(tmp_path):
    log = tmp_path / "_run_on_acc_0.build.log"
    refusal = (
        "IBuilder::buildSerializedNetwork: Error Code 4: Internal Error (kOPT values for profile 0 "
        "violate shape constraints: reshape would change volume 45090 to 45180)"
    )
    log.write_text(f"[TRT] some verbose line\n{refusal}\n[TRT] another line\n")
    block = trt_engine.Block(
        "tensorrt",
        "_run_on_acc_0",
        {},
        "failed",
        error_type="RuntimeError",
        error_message="TensorRT build_serialized_network returned None; engine build failed.",
        build_log=log,
    )
    assert block.builder_errors() == [refusal]
    assert block.failing_node is None  # no converter line: the network was refused as a whole
    assert trt_engine.Block("tensorrt", "_run_on_acc_1", {}, "built").builder_errors() == []


def test_a_failed_block_becomes_an_exception_the_catalog_classifies(tmp_path):
    from casebook import catalog

    refused = trt_engine.Block(
        "tensorrt",
        "_run_on_acc_2",
        {NONZERO: 1},
        "failed",
        error_type="NotImplementedError",
        error_message="This is only available in non TensorRT-RTX environments, currently running in TensorRT-RTX",
    )
    error = refused.as_exception()
    assert type(error) is NotImplementedError
    assert catalog.classify(error, "tensorrt-build").id == "tensorrt-rtx-nonzero"
    odd = trt_engine.Block(
        "tensorrt", "_run_on_acc_0", {}, "failed", error_type="CudaError", error_message="x"
    )
    assert type(odd.as_exception()) is RuntimeError  # a type the parent cannot rebuild
    assert trt_engine.Block("tensorrt", "_run_on_acc_1", {}, "built").as_exception() is None


@pytest.mark.slow
def test_the_peak_memory_of_a_build_worker_is_its_own_not_its_parents():
    import subprocess
    import sys

    from casebook import REPO_ROOT

    ballast = bytearray(600 * 2**20)  # the parent holds 600 MB, as a notebook kernel holds a detector
    ballast[::4096] = b"\x01" * len(ballast[::4096])
    probe = (
        "import resource; from casebook.backends.tensorrt._build_worker import _peak_rss_mb; "
        "print(_peak_rss_mb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO_ROOT
    ).stdout
    own, inherited = map(float, out.split())
    del ballast
    assert inherited > 600 and own < inherited - 300, (own, inherited)


def test_a_build_beside_its_dry_run_names_each_blocks_verdict():
    from pathlib import Path
    from types import SimpleNamespace

    from casebook.backends.tensorrt.engine import Block, EngineBuild

    message = "Could not get tensor shape.\nWhile executing %add_5 : [num_users=1] = call_function[target=torch.ops.aten.add.Tensor]"
    build = EngineBuild(
        blocks=(
            Block(
                "tensorrt",
                "_run_on_acc_0",
                {"aten.add.Tensor": 3},
                "failed",
                error_type="RuntimeError",
                error_message=message,
            ),
            Block("torch", "_run_on_gpu_1", {"aten.index.Tensor": 1}, "pytorch"),
            Block("tensorrt", "_run_on_acc_2", {"aten.mul.Tensor": 2}, "built", engine_bytes=2_500_000),
        ),
        versions={},
        stand_ins=(),
        settings={},
        seconds=1.0,
        peak_rss_mb=1.0,
        engine_dir=Path("/nowhere"),
    )
    dry_run = SimpleNamespace(blocks=[SimpleNamespace(kind="tensorrt", name="_run_on_acc_0")])
    frame = build.against_dry_run(dry_run).data
    assert list(frame.index) == ["_run_on_acc_0", "_run_on_acc_2"]
    assert frame.loc["_run_on_acc_0"].to_dict() == {
        "ops": 3,
        "dry run": "engine",
        "build": "RuntimeError: Could not get tensor shape.",
        "failed at": "aten.add.Tensor",
    }
    assert frame.loc["_run_on_acc_2", "dry run"] == "not a block"
    assert frame.loc["_run_on_acc_2", "build"] == "engine, 2.5 MB"


@pytest.mark.slow
def test_the_worker_freezes_what_was_loaded_only_during_the_compile():
    """Torch-TensorRT's gc.collect() per block skips the frozen objects; a failed compile unfreezes too,
    so that a serving worker frees one build's objects before the next."""
    import gc

    from casebook.backends.tensorrt._build_worker import _collections_skip_what_was_loaded

    assert gc.get_freeze_count() == 0
    with _collections_skip_what_was_loaded():
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
    with pytest.raises(RuntimeError, match="refused"):
        with _collections_skip_what_was_loaded():
            raise RuntimeError("refused")
    assert gc.get_freeze_count() == 0


@pytest.mark.slow
def test_build_engines_keeps_its_worker_for_the_next_build_and_replaces_it_when_the_environment_changes(
    small_program, monkeypatch
):
    program, example = small_program
    build_engines(program, example, min_block_size=1)
    first = trt_engine._SHARED_WORKER["worker"]
    build_engines(program, example, min_block_size=1)
    assert trt_engine._SHARED_WORKER["worker"] is first
    monkeypatch.setenv("CASEBOOK_TEST_WORKER_ENV", "1")  # a variable the running worker does not have
    build_engines(program, example, min_block_size=1)
    second = trt_engine._SHARED_WORKER["worker"]
    assert second is not first and first._process.poll() is not None  # the old one was closed
    assert second._env["CASEBOOK_TEST_WORKER_ENV"] == "1"


@pytest.mark.slow
def test_before_load_registers_in_a_worker_of_its_own(tmp_path, monkeypatch):
    """A custom operator's fake kernel, registered by ``before_load`` in the build's own worker: the
    build passes, and a later build without it still fails (nothing stays registered in the shared
    worker). A registration that raises is reported with its phase."""
    ops = scale_op_module(tmp_path, "casebook_build_test_ops", monkeypatch)
    ops.register_fake()

    class ScaleHead(nn.Module):
        def forward(self, x):
            return ops.scale(x.relu()) + 1

    inputs = (torch.rand(8, 4),)
    program = torch.export.export(ScaleHead(), inputs)
    modules = ["casebook_build_test_ops"]
    registered = ["casebook_build_test_ops:register_fake"]
    build = build_engines(program, inputs, min_block_size=1, import_modules=modules, before_load=registered)
    assert not build.failed and len(build.engines) == 2
    assert [dict(block.ops) for block in build.torch_blocks] == [
        {"torch.ops.casebook_build_test_ops.scale.default": 1}
    ]
    with pytest.raises(EngineCompileError, match="There was no fake impl registered"):
        build_engines(program, inputs, min_block_size=1, import_modules=modules)
    pending = start_engine_builds(
        {
            "own worker": (
                program,
                inputs,
                {"min_block_size": 1, "import_modules": modules, "before_load": registered},
            )
        }
    )
    assert len(pending.result()["own worker"].engines) == 2
    with pytest.raises(
        EngineBuildError, match="phase 'registrations': NotImplementedError: this registration"
    ):
        build_engines(program, inputs, import_modules=modules, before_load=["casebook_build_test_ops:refuse"])
    with pytest.raises(ValueError, match="importable module"):
        build_engines(program, inputs, before_load=[lambda: None])


class TwoHeads(nn.Module):
    """Built by one test alone, so no other build has decomposed it in the shared worker."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3)

    def forward(self, x):
        y = self.conv(x)
        return torch.sigmoid(y).sum((2, 3)), torch.relu(y).amax((2, 3))


@pytest.mark.slow
def test_a_later_build_of_the_same_program_reuses_its_decompositions_and_partitions_the_same():
    torch.manual_seed(0)
    example = torch.randn(1, 3, 12, 12)
    program = torch.export.export(TwoHeads().eval(), (example,))
    moved = {"min_block_size": 1, "torch_executed_ops": {"torch.ops.aten.relu.default"}}
    first = build_engines(program, example, min_block_size=1)
    reused = build_engines(program, example, **moved)
    assert (first.decompositions, reused.decompositions) == ("run", "reused")
    assert (first.program_load, reused.program_load) == ("loaded", "reused")  # one torch.export.load
    assert "(decompositions reused)" in reused.summary()
    fresh = start_engine_builds({"fresh worker": (program, example, moved)}).result()["fresh worker"]
    assert (fresh.decompositions, fresh.program_load) == ("run", "loaded")

    def partition(build):
        return [(b.kind, dict(b.ops), b.status, b.profile) for b in build.blocks]

    assert partition(reused) == partition(fresh)
    assert [dict(b.ops) for b in reused.torch_blocks] == [{"torch.ops.aten.relu.default": 1}]
    # CPU time, not wall time, so load on the machine does not move it: the fresh worker's first
    # build carries the worker's start-up (importing torch and Torch-TensorRT) and the decompositions
    assert 0 < reused.cpu_seconds < fresh.cpu_seconds


def test_the_decomposed_program_is_known_by_content_settings_and_table(tmp_path):
    from casebook.backends.tensorrt._build_worker import _decomposition_key, _program_digest

    torch.manual_seed(0)
    example = torch.randn(1, 3, 12, 12)
    program = torch.export.export(TwoHeads().eval(), (example,))
    for folder in ("a", "b"):  # the archive's top folder is named after the file's folder
        (tmp_path / folder).mkdir()
        torch.export.save(program, str(tmp_path / folder / "program.pt2"))
    torch.export.save(torch.export.export(TwoHeads().eval(), (example,)), str(tmp_path / "other.pt2"))
    digest = _program_digest(tmp_path / "a" / "program.pt2")
    assert digest == _program_digest(tmp_path / "b" / "program.pt2")
    assert digest != _program_digest(tmp_path / "other.pt2")  # other weights
    table = {torch.ops.aten.relu.default: lambda x: x}
    key = _decomposition_key(digest, {"min_block_size": 1}, table)
    # the table's functions are new for each compile; partitioning settings act after this step
    assert key == _decomposition_key(
        digest, {"torch_executed_ops": "{relu}"}, {torch.ops.aten.relu.default: abs}
    )
    assert key != _decomposition_key(digest, {"enable_autocast": True}, table)
    assert key != _decomposition_key(digest, {"decompose_attention": True}, table)
    assert key != _decomposition_key(digest, {}, {torch.ops.aten.gelu.default: abs})


def test_a_loaded_program_is_reused_only_for_the_same_file_and_autocast_settings(tmp_path):
    from casebook.backends.tensorrt import _build_worker as worker

    torch.manual_seed(0)
    example = torch.randn(1, 3, 12, 12)
    path = tmp_path / "program.pt2"
    torch.export.save(torch.export.export(TwoHeads().eval(), (example,)), str(path))
    digest = worker._program_digest(path)
    worker._LAST_LOADED.clear()
    loads = []
    for settings in ({}, {"min_block_size": 1}, {"enable_autocast": True}, {"enable_autocast": True}):
        state = {}
        program = worker._load_program(path, digest, settings, state)
        loads.append((state["program_load"], program))  # the objects, kept alive to compare
    worker._LAST_LOADED.clear()
    assert [load for load, _ in loads] == ["loaded", "reused", "loaded", "reused"]
    programs = [program for _, program in loads]
    assert programs[0] is programs[1] and programs[2] is programs[3]
    assert programs[0] is not programs[2]  # autocast's pass would insert casts in place
