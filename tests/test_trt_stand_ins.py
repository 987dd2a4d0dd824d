"""Each stand-in of `casebook.backends.tensorrt.stand_ins` does what it says, and a CPU-only build needs it.

The "needed" checks leave one stand-in out and build a tiny program in a fresh process (Torch-TensorRT
cannot be imported twice with different stand-ins in one process): the build must then fail where the
stand-in's `why` says it does.
"""

from __future__ import annotations

import textwrap

import pytest
import torch

from casebook.backends.tensorrt import stand_ins as trt_stand_ins
from casebook.backends.tensorrt.engine import rtx_site
from casebook.backends.tensorrt.stand_ins import RuntimeWithoutGPU, SerializedEngineOnly
from casebook.fresh_process import run_python

needs_no_gpu = pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks what fails without a GPU; this machine has one"
)

# A program with a TensorRT block and a PyTorch block holding a parameter (nms, then a multiply kept
# in PyTorch), so every stand-in is on the path of its build.
_BUILD = """
import torch, torchvision
from torch import nn
from casebook.backends.tensorrt import stand_ins as s

s.CUDA_QUERIES.install()
import torch_tensorrt

for stand_in in s.AFTER_IMPORT:
    if stand_in.name != {left_out!r}:
        stand_in.install()


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.weight = nn.Parameter(torch.randn(4))

    def forward(self, x, boxes, scores):
        keep = torchvision.ops.nms(boxes, scores, 0.5)
        return torch.relu(self.conv(x)).sum() + (boxes[keep] * self.weight).sum()


boxes = torch.rand(8, 4)
boxes[:, 2:] += 1
args = (torch.randn(1, 3, 8, 8), boxes, torch.rand(8))
program = torch.export.export(Model(), args)
torch_tensorrt.dynamo.compile(
    program, arg_inputs=list(args), min_block_size=1, torch_executed_ops={{"torch.ops.aten.mul.Tensor"}},
    **s.CPU_ONLY_SETTINGS,
)
print("built")
"""


def test_the_serialized_engine_is_kept_unchanged():
    engine = RuntimeWithoutGPU(logger=None).deserialize_cuda_engine(bytearray(b"\x00engine bytes"))
    assert isinstance(engine, SerializedEngineOnly)
    assert engine.serialize() == b"\x00engine bytes"
    assert engine.get_aliased_input_tensor("output0") is None


def test_every_stand_in_is_described():
    rows = trt_stand_ins.describe()
    assert len(rows) == len(trt_stand_ins.ALL) == 4
    assert all(all(len(text) > 20 for text in row.values()) for row in rows)
    assert trt_stand_ins.ALL == trt_stand_ins.BEFORE_IMPORT + trt_stand_ins.AFTER_IMPORT


@pytest.mark.slow
@needs_no_gpu
def test_without_the_cuda_queries_torch_tensorrt_does_not_import():
    result = run_python("import torch_tensorrt", timeout_s=300, pythonpath=[rtx_site()])
    assert "Found no NVIDIA driver" in result.error


@pytest.mark.slow
@needs_no_gpu
def test_with_all_stand_ins_the_build_succeeds():
    result = run_python(textwrap.dedent(_BUILD.format(left_out="")), timeout_s=300, pythonpath=[rtx_site()])
    assert result.ok, result.stderr[-3000:]
    assert result.stdout.strip().endswith("built")


@pytest.mark.slow
@needs_no_gpu
@pytest.mark.parametrize(
    ("stand_in", "failure"),
    [
        # the interpreter's deserialized "engine" is None without a GPU
        (trt_stand_ins.INTERPRETER_RUNTIME, "assert cuda_engine"),
        (trt_stand_ins.RUNTIME_MODULE, "Found no NVIDIA driver"),
        (trt_stand_ins.FALLBACK_DEVICE, "Found no NVIDIA driver"),
    ],
    ids=["interpreter runtime", "runtime module", "fallback device"],
)
def test_each_stand_in_after_import_is_needed(stand_in, failure):
    result = run_python(
        textwrap.dedent(_BUILD.format(left_out=stand_in.name)), timeout_s=300, pythonpath=[rtx_site()]
    )
    assert not result.ok
    assert failure in result.stderr, result.stderr[-3000:]
