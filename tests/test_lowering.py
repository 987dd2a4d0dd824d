"""lower(): AOTInductor parity, on-disk caching, backend choice and its errors, and the other backends
of the registry (ExecuTorch, ONNX Runtime, a saved ExportedProgram) reached through it.

One real AOTInductor compile (module-scoped); every other test reuses it through the cache or needs
no compile at all, so the file runs in well under a minute on two cores.
"""

import time
import zipfile

import pytest
import torch
import torchvision
from torch import nn

from casebook.backends import Lowered, lower
from casebook.backends import lowering as lowering_module
from casebook.backends.cache import (
    ARTIFACT_DIR_ENV,
    atomic_output,
    cache_key,
    default_cache_dir,
    metadata_path,
)
from casebook.backends.registry import BACKENDS
from casebook.backends.tensorrt.runtime import check_tensorrt_settings
from casebook.parity import assert_parity
from casebook.patches.torchvision import install_nms_fake

NO_CUDA = not torch.cuda.is_available()


class Tiny(nn.Module):
    """Conv + linear with a dict output, so parity has to match a nested structure."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        features = torch.relu(self.conv(x)).mean(dim=(2, 3))
        return {"logits": self.head(features), "features": features}


def _export(seed=0):
    torch.manual_seed(seed)
    model = Tiny().eval()
    x = torch.randn(2, 3, 16, 16)
    return torch.export.export(model, (x,)), x


@pytest.fixture(scope="module")
def program():
    return _export()


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("compiled")


@pytest.fixture(scope="module")
def compiled(program, cache_dir):
    ep, x = program
    return lower(ep, (x,), "aoti", cache_dir=cache_dir, parity_inputs=[(torch.randn(2, 3, 16, 16),)])


@pytest.mark.slow
def test_aoti_lowering_has_parity(program, compiled):
    ep, x = program
    assert isinstance(compiled, Lowered)
    assert (compiled.backend, compiled.from_cache, compiled.device) == ("aoti", False, "cpu")
    assert (
        compiled.parity is not None
        and compiled.parity.inputs_checked == 2
        and compiled.parity.leaves_checked == 4
    )
    assert compiled.artifact_path.exists() and metadata_path(compiled.artifact_path).exists()
    out = compiled(x)
    assert set(out) == {"logits", "features"}
    torch.testing.assert_close(out["logits"], ep.module()(x)["logits"], rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_same_program_and_settings_is_a_cache_hit(program, cache_dir, compiled):
    ep, x = program
    start = time.perf_counter()
    again = lower(ep, (x,), "aoti", cache_dir=cache_dir)
    elapsed = time.perf_counter() - start
    assert again.from_cache and again.artifact_path == compiled.artifact_path
    assert again.parity is not None  # parity is re-checked on the loaded artifact
    assert elapsed < compiled.compile_seconds / 5
    assert again.first_compile_seconds == pytest.approx(compiled.compile_seconds, rel=0.5)
    assert "loaded from cache" in str(again)


@pytest.mark.slow
def test_reexporting_the_same_model_reuses_the_cache(program, cache_dir, compiled):
    ep, x = _export()  # same seed: same weights, fresh ExportedProgram
    assert lower(ep, (x,), "aoti", cache_dir=cache_dir).from_cache


@pytest.mark.slow
@pytest.mark.skipif(not NO_CUDA, reason="checks the CPU-only choice")
def test_auto_picks_aoti_on_cpu_and_says_why(program, cache_dir, compiled):
    ep, x = program
    auto = lower(ep, (x,), "auto", cache_dir=cache_dir, min_block_size=1)
    assert auto.backend == "aoti" and auto.from_cache
    assert "no CUDA device" in auto.reason and "torch.cuda.is_available() is False" in auto.reason
    assert "min_block_size" in auto.reason  # a TensorRT setting, ignored and reported


def test_key_changes_with_settings_weights_inputs_and_backend(program):
    ep, x = program
    base = cache_key(ep, (x,), "aoti", {})
    assert cache_key(ep, (x,), "aoti", {}) == base
    assert cache_key(ep, (x,), "aoti", {"inductor_configs": {"max_autotune": True}}) != base
    assert cache_key(ep, (x,), "eager", {}) != base
    assert cache_key(ep, (torch.randn(4, 3, 16, 16),), "aoti", {}) != base
    assert cache_key(ep, (x.double(),), "aoti", {}) != base
    other_weights, _ = _export(seed=1)
    assert cache_key(other_weights, (x,), "aoti", {}) != base


def test_key_changes_with_the_convolution_algorithm_switches(program):
    """A convolution's fake kernel reads these switches while the compiler traces (it bounds the batch
    below 16 when either is on), so a program compiled with them off must not be served with them on."""
    ep, x = program
    base = cache_key(ep, (x,), "aoti", {})
    with torch.backends.mkldnn.flags(enabled=False):
        without_onednn = cache_key(ep, (x,), "aoti", {})
    with torch.backends.nnpack.flags(enabled=False):
        without_nnpack = cache_key(ep, (x,), "aoti", {})
    assert len({base, without_onednn, without_nnpack}) == 3
    assert cache_key(ep, (x,), "aoti", {}) == base  # leaving the context restores the key


class NmsKeep(nn.Module):
    """Calls a custom operator (torchvision::nms), whose output size comes from its fake kernel."""

    def forward(self, boxes, scores):
        return torchvision.ops.nms(boxes, scores, 0.5)


def test_key_changes_with_the_fake_kernel_of_a_custom_op():
    """A program compiled under the nms_fake override must not be served when it is not active."""
    boxes = torch.rand(8, 4)
    boxes[:, 2:] += boxes[:, :2]
    inputs = (boxes, torch.rand(8))
    ep = torch.export.export(NmsKeep(), inputs, strict=False)
    with_torchvision_fake = cache_key(ep, inputs, "aoti", {})
    uninstall_nms_fake = install_nms_fake()
    try:
        with_override = cache_key(ep, inputs, "aoti", {})
    finally:
        uninstall_nms_fake()
    assert with_override != with_torchvision_fake
    assert cache_key(ep, inputs, "aoti", {}) == with_torchvision_fake  # uninstalling restores the key


def test_key_ignores_setting_order(program):
    ep, x = program
    a = cache_key(ep, (x,), "tensorrt", {"min_block_size": 1, "torch_executed_ops": {"b", "a"}})
    b = cache_key(ep, (x,), "tensorrt", {"torch_executed_ops": {"a", "b"}, "min_block_size": 1})
    assert a == b


@pytest.mark.skipif(not NO_CUDA, reason="checks the error raised without a GPU")
def test_explicit_tensorrt_without_gpu_raises_clear_error(program):
    ep, x = program
    with pytest.raises((RuntimeError, ImportError), match="CUDA GPU"):
        lower(ep, (x,), "tensorrt", min_block_size=1)


def test_removed_tensorrt_settings_are_rejected(program):
    ep, x = program
    with pytest.raises(TypeError, match="enable_autocast"):
        lower(ep, (x,), "auto", enabled_precisions={torch.float16})


def test_explicit_backend_rejects_foreign_settings(program):
    ep, x = program
    with pytest.raises(TypeError, match="min_block_size"):
        lower(ep, (x,), "aoti", min_block_size=1)
    with pytest.raises(ValueError, match="choose one of"):
        lower(ep, (x,), "tvm")


def test_parity_checker_raises_on_wrong_values_and_structure(program):
    ep, x = program
    reference = ep.module()

    def off_by_a_bit(inp):
        out = reference(inp)
        return {**out, "logits": out["logits"] + 1e-2}

    def wrong_structure(inp):
        out = reference(inp)
        return (out["logits"], out["features"])

    tolerances = {torch.float32: (1e-4, 1e-4)}
    with pytest.raises(AssertionError, match=r"input 0: output \['logits'\] differs"):
        assert_parity(reference, off_by_a_bit, [(x,)], tolerances=tolerances)
    with pytest.raises(AssertionError, match="structure differs"):
        assert_parity(reference, wrong_structure, [(x,)], tolerances=tolerances)
    result = assert_parity(reference, reference, [(x,)], tolerances=tolerances)
    assert result.max_abs_diff == 0.0 and result.tolerances == {"float32": (1e-4, 1e-4)}


def test_lower_raises_when_compiled_module_disagrees(program, monkeypatch, tmp_path):
    ep, x = program

    def negated(inp):
        return {k: -v for k, v in ep.module()(inp).items()}

    def broken_backend(backend, ep, args, settings, cache_dir):
        return Lowered("aoti", negated, "", "cpu", 0.0)

    monkeypatch.setattr(lowering_module, "_lower_with", broken_backend)
    with pytest.raises(AssertionError, match="input 0: output"):
        lower(ep, (x,), "aoti", cache_dir=tmp_path)


@pytest.mark.slow
def test_aoti_compiles_with_gradients_off_so_freezing_acts(program, monkeypatch, tmp_path):
    """Inductor freezes only when ``torch.is_grad_enabled()`` is false during the compile."""
    ep, x = program
    seen = []
    real_compile = torch._inductor.aoti_compile_and_package

    def recording(*args, **kwargs):
        seen.append((torch.is_grad_enabled(), kwargs.get("inductor_configs")))
        return real_compile(*args, **kwargs)

    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", recording)
    assert torch.is_grad_enabled()
    frozen = lower(ep, (x,), "aoti", cache_dir=tmp_path, inductor_configs={"freezing": True})
    [(grad_enabled, configs)] = seen
    assert not grad_enabled and configs["freezing"] is True
    assert torch.is_grad_enabled()  # the caller's mode is restored
    source = frozen_wrapper_source(frozen.artifact_path)
    assert "mkldnn__convolution_pointwise" in source  # the convolution became oneDNN's, ReLU fused


def frozen_wrapper_source(package) -> str:
    with zipfile.ZipFile(package) as archive:
        return next(archive.read(n).decode() for n in archive.namelist() if n.endswith(".wrapper.cpp"))


def test_eager_backend_and_rendering(program):
    ep, x = program
    eager = lower(ep, x, "eager")
    assert eager.parity is None and eager.artifact_path is None
    assert "| **backend** |" in eager._repr_markdown_()
    assert "requested explicitly" in str(eager)


def test_cache_dir_env_override(monkeypatch, tmp_path):
    monkeypatch.setenv(ARTIFACT_DIR_ENV, str(tmp_path))
    assert default_cache_dir() == tmp_path / "compiled"
    monkeypatch.delenv(ARTIFACT_DIR_ENV)
    assert default_cache_dir().parts[-2:] == (".artifacts", "compiled")


def test_atomic_output_leaves_nothing_behind_on_failure(tmp_path):
    target = tmp_path / "model.pt2"
    with pytest.raises(RuntimeError), atomic_output(target) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("compile crashed")
    assert list(tmp_path.iterdir()) == []
    with atomic_output(target) as tmp:
        tmp.write_bytes(b"whole")
    assert target.read_bytes() == b"whole" and list(tmp_path.iterdir()) == [target]


def test_auto_with_cuda_but_cpu_inputs_explains_why_not_tensorrt(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    backend, reason = lowering_module.choose_backend("auto", torch.device("cpu"))
    assert backend == "aoti" and "inputs are on cpu" in reason and "TensorRT runs only on CUDA" in reason


def test_unknown_tensorrt_settings_are_rejected_not_swallowed():
    """torch_tensorrt.dynamo.compile takes **kwargs, so a typo would otherwise be ignored silently."""

    class FakeDynamo:
        @staticmethod
        def compile(exported_program, inputs=None, *, min_block_size=5, enable_autocast=False, **kwargs):
            raise AssertionError("not called")

    class FakeTorchTensorRT:
        __version__ = "2.14.0"
        dynamo = FakeDynamo

    check_tensorrt_settings(FakeTorchTensorRT, {"min_block_size": 1, "enable_autocast": True})
    with pytest.raises(TypeError, match="min_block_size"):
        check_tensorrt_settings(FakeTorchTensorRT, {"min_blocksize": 1})


# Backends whose own tests above go through lower() already, compiling once for all of them.
COVERED_ABOVE = {"aoti": "the AOTInductor tests share one compiled package"}
IN_PROCESS_CPU_BACKENDS = [
    name for name, backend in BACKENDS.items() if "cpu" in backend.devices and backend.load is not None
]


@pytest.mark.slow
@pytest.mark.parametrize("backend", [name for name in IN_PROCESS_CPU_BACKENDS if name not in COVERED_ABOVE])
def test_every_cpu_backend_of_the_registry_is_reached_through_lower(program, tmp_path, backend):
    ep, x = program
    first = lower(ep, (x,), backend, cache_dir=tmp_path, parity_inputs=[(torch.zeros(2, 3, 16, 16),)])
    assert first.backend == backend and not first.from_cache and first.artifact_path.is_file()
    assert first.parity.inputs_checked == 2 and first.parity.leaves_checked == 4  # logits and features
    again = lower(ep, (x,), backend, cache_dir=tmp_path)
    assert again.from_cache and again.artifact_path == first.artifact_path


def test_a_cpu_only_backend_refuses_cuda_inputs_and_foreign_settings(program, monkeypatch):
    ep, x = program
    with pytest.raises(TypeError, match=r"backend='executorch' does not take \['inductor_configs'\]"):
        lower(ep, (x,), "executorch", inductor_configs={})
    with pytest.raises(TypeError, match="it accepts threads=..."):
        lower(ep, (x,), "onnx", min_block_size=1)
    monkeypatch.setattr(lowering_module, "first_device", lambda args: torch.device("cuda"))
    with pytest.raises(
        ValueError, match="ExecuTorch with XNNPACK compiles for cpu, but the example inputs are on cuda"
    ):
        lower(ep, (x,), "executorch")
