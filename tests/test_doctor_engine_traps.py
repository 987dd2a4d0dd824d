"""The evidence `casebook.doctor.engine_traps` reads from a program and a build's report (no build here)."""

from types import SimpleNamespace

import torch
from torch import nn
from torch.export import Dim

from casebook.backends.tensorrt.engine import InputProfile
from casebook.doctor import engine_traps


class Centered(nn.Module):
    def forward(self, frames):
        return frames - frames.mean(0)


class Top(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        return x.topk(self.k, dim=1).values * 2


class Write(nn.Module):
    def __init__(self, step):
        super().__init__()
        self.step = step

    def forward(self, cache, new):
        return torch.slice_scatter(cache, new, dim=2, start=0, end=4 * self.step, step=self.step)


def _build(profiles=(), log=None):
    block = SimpleNamespace(name="_run_on_acc_0", profile=tuple(profiles), build_log=log)
    return SimpleNamespace(engines=(block,))


def _profile(name, low, high):
    return InputProfile(name=name, min=(low, 16), opt=(8, 16), max=(high, 16), dtype="float32")


def _clip_program(low):
    return torch.export.export(
        Centered(), (torch.randn(8, 16),), dynamic_shapes=({0: Dim("f", min=low, max=64)},)
    )


def test_a_deliberate_min_of_two_lowered_to_one_is_found():
    (line,) = engine_traps.lowered_minimums(_clip_program(2), _build([_profile("frames", 1, 64)]))
    assert "input frames, dimension 0: the program's range starts at 2, the engine's profile at 1" in line


def test_a_kept_minimum_or_another_bound_is_not_found():
    assert engine_traps.lowered_minimums(_clip_program(2), _build([_profile("frames", 2, 64)])) == []
    assert engine_traps.lowered_minimums(_clip_program(1), _build([_profile("frames", 1, 64)])) == []
    # An engine input that is not one of the program's inputs (a count inside the model) is not compared.
    assert engine_traps.lowered_minimums(_clip_program(2), _build([_profile("nms", 1, 64)])) == []


def test_a_topk_above_the_converter_limit_is_found_only_when_left_to_pytorch():
    program = torch.export.export(Top(5000), (torch.randn(1, 6000),))
    (line,) = engine_traps.large_topks(program, {"torch.ops.aten.topk.default": 1})
    assert "k=5000, above the 3840" in line
    assert engine_traps.large_topks(program, {}) == []
    small = torch.export.export(Top(3840), (torch.randn(1, 6000),))
    assert engine_traps.large_topks(small, {"torch.ops.aten.topk.default": 1}) == []


def test_a_strided_write_is_found_only_with_a_kv_cache_layer_in_the_engine(tmp_path):
    inputs = (torch.zeros(1, 2, 16, 4), torch.ones(1, 2, 4, 4))
    strided = torch.export.export(Write(2), inputs)
    with_layer = tmp_path / "with.log"
    with_layer.write_text("CONSTANT /x\nKVCACHE_UPDATE [KV_CACHE_UPDATE]-[aten_ops.kv_cache_update]-[/w]\n")
    without = tmp_path / "without.log"
    without.write_text("CONSTANT /x\nSCATTER /s\n")
    found = engine_traps.strided_kv_writes(strided, _build(log=with_layer))
    assert "(2, 0, 8, 2)" in found[0] and found[1].endswith("[/w]")
    assert engine_traps.strided_kv_writes(strided, _build(log=without)) == []
    contiguous = torch.export.export(Write(1), inputs)
    assert engine_traps.strided_kv_writes(contiguous, _build(log=with_layer)) == []
