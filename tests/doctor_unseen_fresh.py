"""Unseen cases written on 2026-11-29 by two helpers who never read the doctor's code or the
catalog's patterns: only the catalog's entry titles, to choose each case's `expected` by its cause.
Each model is the few lines of a public report that matter (cited first in its docstring, with what
torch 2.14.1 did with it on the CPU). Batch A: control-flow operators, inputs export cannot take,
the dynamic_shapes spec, aten operators with no fake kernel, saving, in-place writes, state kept
between calls. Batch B: failures met while shipping through ExecuTorch, Torch-TensorRT, Ultralytics,
RF-DETR, SAM 2 and the ONNX exporter.

They join `doctor_unseen.UNSEEN` (at the end of that module) and are scored with the rest. They
were committed with the verdicts the doctor gave them before any code was changed for them.
"""

from __future__ import annotations

import collections

import torch
import torch.nn.functional as F
from torch import nn
from torch.export import Dim
from unseen_case import Unseen


# ================================================================== batch A
# ------------------------------------------------------------------ control-flow operators
class PrintInCondBranch(nn.Module):
    """pytorch/pytorch#147115 (Unable to print in a branch run by torch.cond): a `print` inside one
    branch of `torch.cond`. As the thread says, `torch.cond` is always traced by Dynamo, even in
    eager, so the branch cannot hold a graph break.

    2.14.1: the eager call raises `torch._dynamo.exc.UncapturedHigherOrderOpError` ("This higher
    order operator doesn't work unless it is captured completely with torch.compile. Got graph
    break/error: ... Failed to trace builtin operator ... `print`"). `torch.export.export` itself
    passes (the print is dropped) and the program runs. No catalog entry covers a graph break inside
    a control-flow branch: unclassified."""

    def forward(self, x):
        def long_branch(x):
            print("long branch")
            return x + 1

        def short_branch(x):
            return x - 1

        return torch.cond(x.sum() > 0, long_branch, short_branch, (x,))


class CondElseReturnsInput(nn.Module):
    """pytorch/pytorch#153832 (torch.cond fails at capturing identiy): the else branch returns its
    operand as it is (`return x`; "fails but succeeds with x.clone()"), exported with `Dim.DYNAMIC`
    on both axes of both inputs.

    2.14.1: the eager call and export both raise `UncapturedHigherOrderOpError` ... "Encountered
    aliasing during higher order op tracing ... Higher order ops do not support aliasing" (hint:
    `return input.clone()`). Same cause as the catalog's while_loop body returning an input."""

    def forward(self, x, y):
        def branch_cond_then_1(x):
            return torch.abs(x) + 1

        def branch_cond_else_1(x):
            return x

        x = torch.cond(x.sum() > 0, branch_cond_then_1, branch_cond_else_1, [x])
        return x + y


class EarlyExitWidths(nn.Module):
    """pytorch/pytorch#145734 (Workaround for unsupported return of multiple tensors for
    `torch.cond` in a model intended for torch.onnx.export(dynamo=true,...)): an early-exit model
    whose two branches return tensors of different widths; reported failing with "Expect branches
    to return tensors with same metadata but find pair[0] differ in 'shape: torch.Size([2, s1]) vs
    torch.Size([2, s2])'".

    2.14.1: exports and runs clean. With `Dim("n", min=3)` on the width, the program returns (2, n)
    from one branch and (2, n - 1) from the other, equal to eager on both. Kept with expected=None."""

    def forward(self, x):
        return torch.cond(x.mean() > 0, lambda x: x * 2, lambda x: x[:, 1:] * 3, (x,))


# ------------------------------------------------------------------ code export cannot take
class GradInForward(nn.Module):
    """pytorch/pytorch#146719 (Operations that fail under `torch.export.export`(`torch.autograd.grad`)
    -> `torch.compile`): `x.requires_grad_()` and `torch.autograd.grad` inside `forward` (a force
    from an energy), with `.sqrt()` in the energy, one of the operators the report lists as failing.

    2.14.1: eager runs; `torch.export.export` raises `RuntimeError`: "We found a fake tensor in the
    exported program constant's list. This typically means our tracing system encountered an op that
    we can't trace through. ... lifted_tensor_0". The cause is autograd inside the traced function,
    not a buffer read through `.data`: unclassified."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4))

    def forward(self, x, y):
        x.requires_grad_()
        z = (x * y * self.weight).square().sum().sqrt()
        return torch.autograd.grad(z, [x])[0]


class BatchFeature(collections.UserDict):
    """Stands for transformers' `BatchFeature` (a `UserDict`), what a processor returns."""


class VisionEncoderOnFeatures(nn.Module):
    """pytorch/pytorch#138839 ([export] `run_decompositions` fails with pytree error on
    `Llama-3.2-vision`): the processor's output, a dict subclass, passed to export as it is. The
    maintainer: "export failed to recognize the user subclass dict input as a proper dict and it
    accidentally worked"; the fix is to register the class with pytree.

    2.14.1: export now refuses it up front: `ValueError: Unsupported input type <class
    '...BatchFeature'>. Export only supports pytree containers of basic types ... as input."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 2)

    def forward(self, inputs):
        return self.proj(inputs["pixel_values"]) + inputs["aspect_ratio_mask"]


def _batch_feature() -> BatchFeature:
    return BatchFeature(pixel_values=torch.randn(2, 4), aspect_ratio_mask=torch.ones(2, 2))


# ------------------------------------------------------------------ the dynamic_shapes spec
class ViewByMiddleAxis(nn.Module):
    """pytorch/pytorch#126607 ([ONNX] export() with dynamic shapes fails where
    dynamo_export(dynamic_shapes=True) succeeds): `softmax(x.view(x.size(1), -1), dim=0)`, exported
    with only the batch axis dynamic ("fails if I only specify one"; all three axes dynamic works).

    2.14.1: `torch._dynamo.exc.UserError: Constraints violated (batch)!` with the generated guards
    `L['x'].size()[0] != 20` and `(L['x'].size()[0] % 20) != 0`: the view against the static middle
    axis (20) narrows the range declared for batch. Declaring all three axes dynamic exports."""

    def forward(self, x):
        return nn.functional.softmax(x.view(x.size(1), -1), dim=0)


# ------------------------------------------------------------------ aten operators with no fake kernel
class PerspectiveCoeffs(nn.Module):
    """pytorch/pytorch#114353 (add support for linalg lstsq in dynamo): torchvision's
    `_get_perspective_coeffs` solves the 8x8 system with `torch.linalg.lstsq`, which fullgraph
    tracing cannot take. Here the same system is built from two sets of corner points.

    2.14.1: eager runs. Strict export raises `torch._dynamo.exc.Unsupported: Dynamic shape operator
    (no meta kernel) ... Operator `aten.linalg_lstsq.default` does not have a meta kernel that
    supports dynamic output shapes`; non-strict raises `DynamicOutputShapeException:
    aten.linalg_lstsq.default`. An aten operator, not one the user registered: unclassified while
    the catalog had no entry for those, `aten-op-without-kernel` since."""

    def forward(self, startpoints, endpoints):
        one, zero = torch.ones(()), torch.zeros(())
        rows = []
        for i in range(4):
            p1, p2 = endpoints[i], startpoints[i]
            rows.append(torch.stack([p1[0], p1[1], one, zero, zero, zero, -p2[0] * p1[0], -p2[0] * p1[1]]))
            rows.append(torch.stack([zero, zero, zero, p1[0], p1[1], one, -p2[1] * p1[0], -p2[1] * p1[1]]))
        a_matrix = torch.stack(rows)
        b_matrix = startpoints.reshape(8, 1)
        return torch.linalg.lstsq(a_matrix, b_matrix).solution.squeeze(1)


_CORNERS = torch.tensor([[0.0, 0.0], [31.0, 0.0], [31.0, 31.0], [0.0, 31.0]])


# ------------------------------------------------------------------ saving and loading
class Float8Weights(nn.Module):
    """pytorch/pytorch#131654 (torch.export.save doesn't support torch.float8_e4m3fn dtype): a layer
    whose weight is stored in `torch.float8_e4m3fn`; `torch.export.save` failed on the dtype. (The
    report's `Linear.to(float8)` cannot run eagerly on the CPU, so the weight is a float8 buffer
    upcast in `forward`.)

    2.14.1: exports, `torch.export.save` / `torch.export.load` round-trip, and the loaded program
    equals eager. Kept with expected=None."""

    def __init__(self):
        super().__init__()
        self.register_buffer("weight", torch.randn(2, 4).to(torch.float8_e4m3fn))

    def forward(self, x):
        return torch.relu(x @ self.weight.to(torch.float32).T)


# ------------------------------------------------------------------ in-place writes
class MaskAfterTo(nn.Module):
    """pytorch/pytorch#127571 ([export] Cannot mutate tensors with frozen storage): a causal mask
    built with `torch.full`, converted with `.to(self.dtype)` (the same dtype, so an alias), then
    written in place with `masked_fill_`; export raised "cannot mutate tensors with frozen storage".

    2.14.1: exports and runs clean; the program equals eager. Kept with expected=None."""

    def __init__(self):
        super().__init__()
        self.dtype = torch.float32

    def forward(self, context_mask):
        mask = torch.full((4, 4), torch.finfo(self.dtype).min)
        mask = mask.to(self.dtype)
        mask.masked_fill_(context_mask, torch.finfo(self.dtype).min / 2)
        return mask


# ------------------------------------------------------------------ state kept between calls
class CachedAttentionBias(nn.Module):
    """pytorch/pytorch#155114 (After `torch.export.export`, my model inference results in
    FakeTensor.): timm's EfficientFormer attention, which in eval mode caches the gathered attention
    bias in a dict attribute on its first call; after export the cached entry was a FakeTensor and
    the eager model returned FakeTensors.

    2.14.1: exports and runs clean. The eager model still returns real tensors after export, and the
    program equals eager; if the cache was filled by an eager call first, the program holds the
    gathered bias as a lifted constant. Kept with expected=None."""

    def __init__(self, resolution=4, heads=2, dim=8):
        super().__init__()
        pos = torch.stack(
            torch.meshgrid(torch.arange(resolution), torch.arange(resolution), indexing="ij")
        ).flatten(1)
        rel = (pos[..., :, None] - pos[..., None, :]).abs()
        self.attention_biases = nn.Parameter(torch.zeros(heads, resolution * resolution))
        self.register_buffer("attention_bias_idxs", rel[0] * resolution + rel[1], persistent=False)
        self.attention_bias_cache = {}
        self.qkv = nn.Linear(dim, 3 * dim)
        self.heads = heads

    @torch.no_grad()
    def train(self, mode=True):
        super().train(mode)
        if mode and self.attention_bias_cache:
            self.attention_bias_cache = {}
        return self

    def get_attention_biases(self, device):
        if torch.jit.is_tracing() or self.training:
            return self.attention_biases[:, self.attention_bias_idxs]
        key = str(device)
        if key not in self.attention_bias_cache:
            self.attention_bias_cache[key] = self.attention_biases[:, self.attention_bias_idxs]
        return self.attention_bias_cache[key]

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        attn = (q @ k.transpose(-2, -1)) + self.get_attention_biases(x.device)
        return (attn.softmax(-1) @ v).transpose(1, 2).reshape(b, n, c)


_DYN = Dim.DYNAMIC

FRESH_A = {
    "print-inside-cond-branch": Unseen(
        "pytorch/pytorch#147115",
        "unclassified",
        lambda: dict(model=PrintInCondBranch(), args=(torch.ones(3),)),
    ),
    "cond-else-returns-input": Unseen(
        "pytorch/pytorch#153832",
        "loop-aliasing",
        lambda: dict(
            model=CondElseReturnsInput(),
            args=(torch.rand(3, 4), torch.rand(3, 4)),
            dynamic_shapes=({0: _DYN, 1: _DYN}, {0: _DYN, 1: _DYN}),
        ),
    ),
    "cond-branches-different-widths": Unseen(
        "pytorch/pytorch#145734",
        None,
        lambda: dict(
            model=EarlyExitWidths(), args=(torch.rand(2, 6),), dynamic_shapes=({1: Dim("n", min=3)},)
        ),
    ),
    "autograd-grad-in-forward": Unseen(
        "pytorch/pytorch#146719",
        "unclassified",
        lambda: dict(model=GradInForward(), args=(torch.randn(3, 4), torch.randn(3, 4))),
    ),
    "dict-subclass-input": Unseen(
        "pytorch/pytorch#138839",
        "unsupported-input-type",
        lambda: dict(model=VisionEncoderOnFeatures(), args=(_batch_feature(),)),
    ),
    "view-by-static-axis-batch-only": Unseen(
        "pytorch/pytorch#126607",
        "constraints-violated",
        lambda: dict(
            model=ViewByMiddleAxis(),
            args=(torch.rand(64, 20, 16),),
            dynamic_shapes={"x": {0: Dim("batch")}},
        ),
    ),
    "lstsq-no-meta-kernel": Unseen(
        "pytorch/pytorch#114353",
        # was "unclassified" until the catalog had an entry for aten operators (2026-12-02)
        "aten-op-without-kernel",
        lambda: dict(
            model=PerspectiveCoeffs(),
            args=(
                _CORNERS.clone(),
                _CORNERS + torch.tensor([[1.0, 2.0], [-2.0, 1.0], [-1.0, -2.0], [2.0, -1.0]]),
            ),
            strict=True,
        ),
    ),
    "float8-weight-saved": Unseen(
        "pytorch/pytorch#131654",
        None,
        lambda: dict(model=Float8Weights(), args=(torch.randn(3, 4),)),
    ),
    "masked-fill-after-to": Unseen(
        "pytorch/pytorch#127571",
        None,
        lambda: dict(model=MaskAfterTo(), args=(torch.rand(4, 4) > 0.5,)),
    ),
    "bias-cache-filled-in-forward": Unseen(
        "pytorch/pytorch#155114",
        None,
        lambda: dict(model=CachedAttentionBias().eval(), args=(torch.randn(1, 16, 8),)),
    ),
}


# ================================================================== batch B
# ------------------------------------------------------------------ dynamic dimensions
class SmallClassifier(nn.Module):
    """pytorch/TensorRT#4103 ("opt-shape cannot be set same as min-shape when torch_tensorrt.compile"):
    `torch_tensorrt.Input(min_shape=[1, 3, 256, 256], opt_shape=[1, 3, 256, 256], max_shape=[128, ...])`
    makes Torch-TensorRT export with the opt shape as the example, so the batch example is 1 while the
    batch is declared dynamic from 1 to 128; export fails before TensorRT is reached. 2.14.1: export
    raises `torch._dynamo.exc.UserError: Constraints violated (batch)! ... You marked batch as dynamic
    but your code specialized it to be a constant (1)`."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(self.conv(x).relu().mean((2, 3)))


class C2fBlock(nn.Module):
    """ultralytics/ultralytics#20370 ("Use `dynamo=True` for ONNX exports"): exporting YOLO with a dynamic
    batch (example batch 2, range [1, inf)) failed with `Constraints violated (batch)! ... satisfy the
    generated guard L['x'].size()[0] != 1`, the guard added in `_meta_registrations.py`
    `pick_memory_format` (the convolution meta deciding the memory format). This is YOLO's C2f block: a
    convolution run on one channel half of `chunk(2, 1)`, a slice whose contiguity depends on the batch
    being 1. 2.14.1: exports and runs clean (the meta no longer guards on it), so this is kept with
    expected None."""

    def __init__(self):
        super().__init__()
        self.cv1 = nn.Conv2d(3, 8, 1)
        self.m = nn.Conv2d(4, 4, 3, padding=1)
        self.cv2 = nn.Conv2d(12, 8, 1)

    def forward(self, x):
        y = list(self.cv1(x).chunk(2, 1))
        y.append(self.m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class PadToMultipleOf32(nn.Module):
    """pytorch/pytorch#136216 ("[torch.export] Detect internal respect constrains"), the minimal repro of
    the ONNX `dynamo=True` report pytorch/pytorch#136089: an image model pads H and W up to a multiple of
    32 behind a Python `if pad_H > 0 or pad_W > 0`, exported with H and W dynamic; the branch taken for
    the example becomes a guard. 2.14.1: export raises `UserError: Constraints violated (height)! ...
    Not all values of height ... satisfy the generated guard ((32 + (-1)*(L['inputs'].size()[2] % 32)) %
    32) > 0` (and suggests `height = 32*_height - 14`)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)

    def forward(self, inputs):
        _, _, h, w = inputs.shape
        pad_h = (32 - h % 32) % 32
        pad_w = (32 - w % 32) % 32
        if pad_h > 0 or pad_w > 0:
            top, left = pad_h // 2, pad_w // 2
            inputs = F.pad(inputs, (left, pad_w - left, top, pad_h - top), mode="reflect")
        return self.conv(inputs)


class LstmEncoder(nn.Module):
    """pytorch/executorch#5176 ("Torch export can't support dynamics shapes for lstm"): an `nn.LSTM`
    (batch_first) exported with the sequence axis dynamic, `Dim("dim1_x", min=6, max=100000)`, example
    length 100. 2.14.1: export raises `UserError: Constraints violated (dim1_x)! ... You marked dim1_x as
    dynamic but your code specialized it to be a constant (100)` (the LSTM is traced step by step). The
    case uses length 12: the cause does not depend on the length, and tracing 100 steps took 38 s."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(32, 16, num_layers=1, bidirectional=False, batch_first=True)

    def forward(self, x):
        x, _ = self.lstm(x)
        return x


class PositionEmbeddingSine(nn.Module):
    """SAM2's sine position encoding (sam2/modeling/position_encoding.py), cached per (H, W) in a dict
    and repeated over the batch."""

    def __init__(self, num_pos_feats=8, temperature=10000):
        super().__init__()
        self.num_pos_feats = num_pos_feats // 2
        self.temperature = temperature
        self.cache = {}

    @torch.no_grad()
    def forward(self, x):
        cache_key = (x.shape[-2], x.shape[-1])
        if cache_key in self.cache:
            return self.cache[cache_key][None].repeat(x.shape[0], 1, 1, 1)
        y_embed = (
            torch.arange(1, x.shape[-2] + 1, dtype=torch.float32)
            .view(1, -1, 1)
            .repeat(x.shape[0], 1, x.shape[-1])
        )
        x_embed = (
            torch.arange(1, x.shape[-1] + 1, dtype=torch.float32)
            .view(1, 1, -1)
            .repeat(x.shape[0], x.shape[-2], 1)
        )
        dim_t = torch.arange(self.num_pos_feats, dtype=torch.float32)
        dim_t = self.temperature ** (2 * (dim_t // 2) / self.num_pos_feats)
        pos_x = x_embed[:, :, :, None] / dim_t
        pos_y = y_embed[:, :, :, None] / dim_t
        pos_x = torch.stack((pos_x[:, :, :, 0::2].sin(), pos_x[:, :, :, 1::2].cos()), dim=4).flatten(3)
        pos_y = torch.stack((pos_y[:, :, :, 0::2].sin(), pos_y[:, :, :, 1::2].cos()), dim=4).flatten(3)
        pos = torch.cat((pos_y, pos_x), dim=3).permute(0, 3, 1, 2)
        self.cache[cache_key] = pos[0]
        return pos


class Sam2NeckLevel(nn.Module):
    """pytorch/pytorch#142167 ("Can't torch.export.export SAM2, SymInt graph input is not implemented
    yet"): the SAM2 image encoder exported with only the batch dynamic, `Dim("batch", min=2, max=20)`,
    example batch 5 (bfloat16 on CUDA in the report; float32 on CPU here), failed with `AssertionError:
    SymInt graph input is not implemented yet`. Reduced to one FPN-neck level with SAM2's size-keyed
    position-encoding cache, which forward fills (a Python dict written during tracing). 2.14.1: exports
    and runs clean, whether the cache is empty or warm, and the program matches eager at batch 3; the
    report's assertion does not reproduce, so this is kept with expected None."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 1)
        self.position_encoding = PositionEmbeddingSine(8)

    def forward(self, x):
        f = self.conv(x)
        return f + self.position_encoding(f).to(f.dtype)


# ------------------------------------------------------------------ calling the program
class QueryKeyScores(nn.Module):
    """pytorch/TensorRT#3020 ("ValueError: Trying to flatten user inputs with exported input tree spec"):
    the docs example exports `forward(self, query, key)` with a shared dynamic `seq_len`, then calls the
    compiled module as `trt_gm(inputs)`, the list of two tensors as one argument. The same happens with
    the exported program on CPU. 2.14.1: export is clean and `program.module()(q, k)` runs;
    `program.module()([q, k])` raises `ValueError: Trying to flatten user inputs with exported input tree
    spec ... Please check that the inputs have the same number and type of args and kwargs as the ones
    you used when tracing`."""

    def forward(self, query, key):
        return torch.matmul(query, key.transpose(-1, -2))


# ------------------------------------------------------------------ private torch helpers
class SpatialShapesAsTensor(nn.Module):
    """roboflow/rf-detr#1142 ("feat(export): add ExecuTorch (.pte) export"), a user's export of RFDETRNano
    in the thread: tracing fails at rfdetr/models/transformer.py `spatial_shapes =
    torch.stack([torch._shape_as_tensor(src)[2:4] for src in srcs])`, the deformable-attention levels'
    sizes kept in a tensor and split by. 2.14.1 (non-strict): export raises `RuntimeError: The tensor has
    a non-zero number of elements, but its data is not allocated yet. If you're using
    torch.compile/export/fx, it is likely that we are erroneously tracing into a custom kernel` (strict
    export fails differently, `Unsupported: TypeError when making fake tensor call` on the stack)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Conv2d(4, 4, 1)

    def forward(self, f1, f2):
        srcs = [self.proj(f1), self.proj(f2)]
        spatial_shapes = torch.stack([torch._shape_as_tensor(s)[2:4] for s in srcs])
        value = torch.cat([s.flatten(2).transpose(1, 2) for s in srcs], 1)
        value_list = value.split([h * w for h, w in spatial_shapes], dim=1)
        levels = [
            v.transpose(1, 2).reshape(v.shape[0], 4, h, w).mean((2, 3))
            for v, (h, w) in zip(value_list, spatial_shapes, strict=False)
        ]
        return torch.stack(levels, 1)


def _query_key() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(1, 12, 7, 64), torch.randn(1, 12, 7, 64)


def _seq_len_spec() -> tuple[dict, dict]:
    seq_len = Dim("seq_len", min=1, max=10)
    return ({2: seq_len}, {2: seq_len})


def _list_call_case() -> dict:
    q, k = _query_key()
    return dict(
        model=QueryKeyScores().eval(),
        args=(q, k),
        dynamic_shapes=_seq_len_spec(),
        check_inputs=[([q, k],)],  # called as trt_gm(inputs): one list where two tensors were exported
    )


FRESH_B = {
    "trt-opt-shape-equals-min": Unseen(
        "pytorch/TensorRT#4103",
        "size-one-specialized",
        lambda: dict(
            model=SmallClassifier().eval(),
            args=(torch.rand(1, 3, 16, 16),),
            dynamic_shapes=({0: Dim("batch", min=1, max=128)},),
        ),
    ),
    "c2f-chunk-conv-dynamic-batch": Unseen(
        "ultralytics/ultralytics#20370",
        None,
        lambda: dict(
            model=C2fBlock().eval(),
            args=(torch.rand(2, 3, 16, 16),),
            dynamic_shapes=({0: Dim("batch", min=1)},),
        ),
    ),
    "pad-to-32-branch": Unseen(
        "pytorch/pytorch#136216",
        "constraints-violated",
        lambda: dict(
            model=PadToMultipleOf32().eval(),
            args=(torch.rand(1, 1, 50, 70),),
            dynamic_shapes=({2: Dim("height", min=32, max=1024), 3: Dim("width", min=32, max=1024)},),
        ),
    ),
    "lstm-dynamic-sequence": Unseen(
        "pytorch/executorch#5176",
        "constraints-violated",
        lambda: dict(
            model=LstmEncoder().eval(),
            args=(torch.randn(1, 12, 32),),
            dynamic_shapes={"x": {1: Dim("dim1_x", min=6, max=100000)}},
        ),
    ),
    "sam2-position-cache-dynamic-batch": Unseen(
        "pytorch/pytorch#142167",
        None,
        lambda: dict(
            model=Sam2NeckLevel().eval(),
            args=(torch.randn(5, 3, 16, 16),),
            dynamic_shapes={"x": {0: Dim("batch", min=2, max=20)}},
        ),
    ),
    "trt-program-called-with-list": Unseen(
        "pytorch/TensorRT#3020",
        "kwarg-mismatch",
        _list_call_case,
    ),
    "rfdetr-shape-as-tensor": Unseen(
        "roboflow/rf-detr#1142",
        "unclassified",
        lambda: dict(
            model=SpatialShapesAsTensor().eval(),
            args=(torch.rand(1, 4, 8, 8), torch.rand(1, 4, 4, 4)),
        ),
    ),
}


FRESH = {**FRESH_A, **FRESH_B}
