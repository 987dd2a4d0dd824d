"""Failures the doctor was never shown, each modelled on a public report (cited in its docstring).

`tests/doctor_cases.py` holds one reproduction per catalog entry, written together with the entry.
These cases are different: each copies the shape of a real report (a model from an issue thread,
shortened to the lines that fail), and `expected` names the catalog entry a reader of that report
needs, chosen by the cause, not by the message. `tests/test_doctor_unseen.py` runs them all; the
doctor is right on a case when its first finding is that entry (the root cause first).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
import torchvision
from torch import nn
from torch.export import Dim


@dataclass(frozen=True)
class Unseen:
    """One case: the report it is modelled on, the entry it needs, and the `diagnose` keywords."""

    report: str
    expected: str | None  # None: the model exports and runs clean on 2.14.1
    call: Callable[[], dict]
    missed: str = ""  # why the doctor does not get it right yet (the test expects it to fail)


# ------------------------------------------------------------------ values known only at run time
class RepeatByCount(nn.Module):
    """A repeat count read from a tensor with int(): pytorch/pytorch#137062 ("int(x.item()) fails
    only in strict=False")."""

    def forward(self, x, count):
        return x.repeat(int(count.item()), 1)


class PaddingMask(nn.Module):
    """A padding mask as long as the longest sequence, `lengths.max().item()`
    (pytorch/pytorch#113002, "AOTInductor data dependents error when using max().item()")."""

    def forward(self, lengths):
        max_seq_len = lengths.max().item()
        row = torch.arange(0, max_seq_len, 1)
        mask = (row < lengths.unsqueeze(-1)).float()
        return mask[:, :, None]


class IntOfLongest(nn.Module):
    """The same mask with the length taken as `int(lengths.max())`, as sequence-mask helpers write it
    (pytorch/pytorch#163146's `sequence_mask`, with `int()` for `.item()`)."""

    def forward(self, lengths):
        row = torch.arange(int(lengths.max()))
        return (row < lengths.unsqueeze(-1)).float()


class QwenGridPositions(nn.Module):
    """Qwen2-VL's rotary position ids (pytorch/pytorch#158786): per-image grid sizes read with
    `.item()`, then reshaped into 2x2 merge windows. Reported on 2.7.1; exports on 2.14.1."""

    def forward(self, grid_thw):
        pos = []
        for _, h, w in grid_thw:
            h, w = h.item(), w.item()
            ids = torch.arange(h).unsqueeze(1).expand(-1, w)
            pos.append(ids.reshape(h // 2, 2, w // 2, 2).permute(0, 2, 1, 3).flatten())
        return torch.cat(pos)


class OneCropPerPositive(nn.Module):
    """A Python loop over a data-dependent number of boxes, the pattern pytorch/pytorch#96367 gives
    as its motivation ("Conditional computation on variable number of boxes"), counted with
    `int(mask.sum())`."""

    def forward(self, scores, features):
        crops = [features[i] for i in range(int((scores > 0.5).sum()))]
        return torch.stack(crops).sum(0)


class PadToStride(nn.Module):
    """detectron2's `ImageList.from_tensors` (facebookresearch/detectron2#5347), called as in the
    report: the padded size is computed in a tensor built from the images' sizes. Reported on 2.4;
    exports on 2.14.1 (`constant_pad_nd` no longer branches on the pad's sign while tracing)."""

    def forward(self, images: list[torch.Tensor]):
        from detectron2.structures import ImageList

        return ImageList.from_tensors(images, size_divisibility=32).tensor


class ImageTokenPositions(nn.Module):
    """Phi-3-vision (pytorch/pytorch#128906): `if len(positions.tolist()) > 0` on the positions of
    image placeholder tokens."""

    def forward(self, input_ids, image_embeds):
        positions = torch.nonzero(input_ids < 0)
        if len(positions.tolist()) > 0:
            return input_ids.clamp_min(0), image_embeds * 2
        return input_ids, image_embeds


class ExpertLoop(nn.Module):
    """DeepSeek-VL2's mixture of experts (pytorch/pytorch#154559): run each expert on its slice of
    the sorted tokens, skipping experts with no tokens."""

    def __init__(self):
        super().__init__()
        self.experts = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

    def forward(self, sorted_tokens, tokens_per_expert):
        outputs, start = [], 0
        for i, num_tokens in enumerate(tokens_per_expert.tolist()):
            if num_tokens == 0:
                continue
            outputs.append(self.experts[i](sorted_tokens[start : start + num_tokens]))
            start += num_tokens
        return torch.cat(outputs)


class LongRopeScale(nn.Module):
    """transformers' longrope (pytorch/pytorch#163791): long or short factors chosen by a Python
    `if` on the largest position id."""

    def __init__(self):
        super().__init__()
        self.register_buffer("short_factor", torch.ones(4))
        self.register_buffer("long_factor", torch.full((4,), 0.25))

    def forward(self, x, position_ids):
        seq_len = torch.max(position_ids) + 1
        factor = self.long_factor if seq_len > 8 else self.short_factor
        return x * factor


class ScoreThenBatchedNms(nn.Module):
    """RPN post-processing: a score filter, then torchvision's `batched_nms`
    (pytorch/pytorch#146152, fasterrcnn_mobilenet_v3_large_fpn)."""

    def forward(self, boxes, scores, labels):
        keep = scores > 0.05
        return torchvision.ops.batched_nms(boxes[keep], scores[keep], labels[keep], 0.5)


def _boxes(count: int) -> torch.Tensor:
    corners = torch.rand(count, 2) * 50
    return torch.cat([corners, corners + 10], 1)


# ------------------------------------------------------------------ dynamic dimensions
class ResizeToOwnSize(nn.Module):
    """A resize to `int(x.shape[-2] / 1)`: pytorch/pytorch#138853 ("Using int(shape) in export would
    result in silent specialization")."""

    def forward(self, x):
        size = (int(x.shape[-2] / 1), int(x.shape[-1] / 1))
        return F.interpolate(x, size=size, mode="bilinear")


class DownUp(nn.Module):
    """Half then double with float scales, added to the input (pytorch/pytorch#131897): only even
    sizes come back to their size."""

    def forward(self, x, y):
        x = F.interpolate(x, scale_factor=0.5, mode="bilinear")
        x = F.interpolate(x, scale_factor=2.0, mode="bilinear")
        return x + y


class PositionEmbedding(nn.Module):
    """BERT-style position ids sliced from a fixed-length buffer (pytorch/pytorch#126127): the
    sequence is bounded by the buffer."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(16, 8)
        self.register_buffer("position_ids", torch.arange(16).unsqueeze(0))

    def forward(self, input_ids):
        positions = self.position_ids[:, : input_ids.shape[1]]
        return self.emb(input_ids) + self.emb(positions)


class Broadcast(nn.Module):
    def forward(self, x):
        return x.expand(x.shape[0], 3) * 2


def _pretraced_broadcast() -> torch.nn.Module:
    """A module traced earlier with real tensors (`make_fx`), so the size is a literal in its graph
    (pytorch/pytorch#134137)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(Broadcast())(torch.rand(5, 1))


class MatrixOfItself(nn.Module):
    """`x @ x.T` exported from a batch of one with `Dim("batch", min=1)` (pytorch/pytorch#176349)."""

    def forward(self, x):
        return x @ x.T


class TwoByTwoPatches(nn.Module):
    """ViT patchify into 2x2 windows with one `Dim` per side (a Swin-style window partition,
    pytorch/pytorch#131897's family): the reshape needs even sizes."""

    def forward(self, x):
        b, c, h, w = x.shape
        return x.reshape(b, c, h // 2, 2, w // 2, 2).mean((3, 5))


# ------------------------------------------------------------------ inputs, outputs and code
class TwoInputs(nn.Module):
    """pytorch/pytorch#148564: a `dynamic_shapes` dict that names only some of the arguments."""

    def forward(self, start, end):
        return start.sum() + end.sum()


class Instances:
    """Stands for detectron2's `Instances` (pytorch/pytorch#140615)."""

    def __init__(self, boxes, scores):
        self.boxes, self.scores = boxes, scores


class PredictsInstances(nn.Module):
    """A detectron2-style head that returns `Instances` (pytorch/pytorch#140615)."""

    def forward(self, x):
        return Instances(x[:, :4], x[:, 4])


class UsesNumpySum(nn.Module):
    """The Kokoro model's `.numpy()` in forward (pytorch/pytorch#148779)."""

    def forward(self, x):
        return x + x.numpy().sum()


class KeyCache(nn.Module):
    """llama's key cache kept as a plain tensor attribute and written in forward
    (meta-llama/llama-models#380: "Constant attention.cache_k is mutated in the forward method")."""

    def __init__(self):
        super().__init__()
        self.cache_k = torch.zeros(4, 8)

    def forward(self, xk, start_pos: int):
        self.cache_k[start_pos : start_pos + xk.shape[0]] = xk
        return self.cache_k.sum(0)


class StepCounter(nn.Module):
    """A decoding step counter kept, like llama's `cache_k` (meta-llama/llama-models#380), as a plain
    tensor attribute and advanced in forward: the program differs from eager."""

    def __init__(self):
        super().__init__()
        self.step = torch.zeros(1)

    def forward(self, x):
        self.step.add_(1)
        return x * self.step


class DropoutHead(nn.Module):
    """pytorch/pytorch#103681 ("Exported model with dropout incorrectly applies dropout during eval"):
    a functional dropout keyed on `self.training`, exported before `.eval()`."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return F.dropout(self.fc(x), 0.5, self.training)


class ReturnsDynamicCache(nn.Module):
    """A causal LM output holding a transformers `DynamicCache` (pytorch/pytorch#148748,
    DeepSeek-R1-Distill-Qwen)."""

    def forward(self, x):
        from transformers.cache_utils import DynamicCache

        cache = DynamicCache()
        cache.update(x[None, None], x[None, None], 0)
        return x * 2, cache


class EarlyExit(nn.Module):
    """A `torch._check` inside one `torch.cond` branch (pytorch/pytorch#147991)."""

    def forward(self, x):
        def long_input(x):
            torch._check(x.shape[1] > 5)
            return x + 1

        def short_input(x):
            return x + 2

        return torch.cond(x.shape[1] > 5, long_input, short_input, (x,))


class CatPlusStrided(nn.Module):
    """pytorch/pytorch#146315: `cat(x, y) + z[:, ::2]` with three independent `Dim`s. On 2.14.1 the
    only violation left is `((1 + dz) // 2) != 1` (a strided slice of one element would broadcast);
    `Dim("dz", min=3)` exports and runs, as `not-one-guard` advises."""

    def forward(self, x, y, z):
        return torch.cat((x, y), axis=1) + z[:, ::2]


class ObservedLinear(nn.Module):
    """A layer after eager quantization's `prepare`: the observer is still in the forward path
    (pytorch/pytorch#157355)."""

    def __init__(self):
        super().__init__()
        from torch.ao.quantization.observer import HistogramObserver

        self.fc = nn.Linear(4, 4)
        self.activation_post_process = HistogramObserver()

    def forward(self, x):
        return self.activation_post_process(self.fc(x))


# The export script of huggingface/transformers#27871's review ("both saving and loading are done in
# the same python process"): the output class is defined and registered in the script itself.
_SCRIPT_WITH_ITS_OWN_OUTPUT = """
from dataclasses import dataclass

import torch


@dataclass
class SegmenterOutput:
    logits: torch.Tensor
    pred_boxes: torch.Tensor


torch.export.register_dataclass(SegmenterOutput, serialized_type_name="segmenter.SegmenterOutput")


class Segmenter(torch.nn.Module):
    def forward(self, x):
        return SegmenterOutput(x.softmax(-1), x[:, :4].sigmoid())
"""


@functools.cache
def _segmenter_from_a_script() -> type:
    namespace = {"__name__": "__main__"}
    exec(_SCRIPT_WITH_ITS_OWN_OUTPUT, namespace)
    return namespace["Segmenter"]


@torch.library.custom_op("casebook_unseen::scale_rows", mutates_args=())
def scale_rows(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """A custom operator of the model's own (pytorch/pytorch#151746: a custom op "cannot be resolved"
    where the program is loaded)."""
    return x * s[:, None]


@scale_rows.register_fake
def _(x, s):
    return torch.empty_like(x)


class UsesScaleRows(nn.Module):
    def forward(self, x, s):
        return scale_rows(x, s) + 1


# ------------------------------------------------------------------ moved to another device
class LstmTagger(nn.Module):
    """pytorch/pytorch#151010 ("Exported LSTM cannot be moved on CUDA device"): an LSTM exported on the
    CPU, its program moved with `.to("cuda")`; the zero initial state is made on the traced device."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out)


class AnchorsPerCell(nn.Module):
    """pytorch/pytorch#126674 (a RetinaNet program, exported on the CPU, fails after `.cuda()` with
    "Expected all tensors to be on the same device"): anchor centres from `arange` over the feature
    grid, made on the feature's device while tracing."""

    def __init__(self):
        super().__init__()
        self.features = nn.Conv2d(3, 4, 3, stride=4, padding=1)

    def forward(self, images):
        feature = self.features(images)
        h, w = feature.shape[-2:]
        ys = (torch.arange(h, device=feature.device) * 4.0)[:, None].expand(h, w)
        xs = (torch.arange(w, device=feature.device) * 4.0)[None, :].expand(h, w)
        centres = torch.stack([xs, ys], -1).reshape(-1, 2)
        return feature.flatten(2).transpose(1, 2)[..., :2] + centres


UNSEEN: dict[str, Unseen] = {
    # values known only at run time
    "int-of-item": Unseen(
        "pytorch/pytorch#137062",
        "data-dependent-value-int",
        lambda: dict(model=RepeatByCount(), args=(torch.rand(2, 3), torch.tensor(3))),
    ),
    "padding-mask-of-item": Unseen(
        "pytorch/pytorch#113002",
        None,
        lambda: dict(model=PaddingMask(), args=(torch.tensor([5, 4, 4, 4], dtype=torch.int32),)),
    ),
    "int-of-max": Unseen(
        "pytorch/pytorch#163146",
        "data-dependent-value-int",
        lambda: dict(model=IntOfLongest(), args=(torch.tensor([5, 4, 4, 4]),)),
    ),
    "grid-item-reshape": Unseen(
        "pytorch/pytorch#158786",
        None,
        lambda: dict(model=QwenGridPositions(), args=(torch.tensor([[1, 4, 6], [1, 2, 2]]),)),
    ),
    "loop-over-mask-count": Unseen(
        "pytorch/pytorch#96367",
        "data-dependent-value-int",
        lambda: dict(model=OneCropPerPositive(), args=(torch.tensor([0.9, 0.2, 0.7]), torch.rand(3, 4))),
    ),
    "packed-sizes-pad": Unseen(
        "facebookresearch/detectron2#5347",
        None,
        lambda: dict(model=PadToStride(), args=(list(torch.randn(1, 3, 24, 24)),)),
    ),
    "tolist-of-nonzero": Unseen(
        "pytorch/pytorch#128906",
        "data-dependent-guard",
        lambda: dict(model=ImageTokenPositions(), args=(torch.tensor([[-1, 5, -1, 7]]), torch.rand(2, 8))),
    ),
    "expert-loop-skip-empty": Unseen(
        "pytorch/pytorch#154559",
        "data-dependent-guard",
        lambda: dict(model=ExpertLoop(), args=(torch.rand(6, 4), torch.tensor([2, 0, 4]))),
    ),
    "branch-on-largest-position": Unseen(
        "pytorch/pytorch#163791",
        "data-dependent-guard",
        lambda: dict(model=LongRopeScale(), args=(torch.rand(2, 4), torch.arange(6).unsqueeze(0))),
    ),
    "nms-after-score-filter": Unseen(
        "pytorch/pytorch#146152",
        "data-dependent-guard",
        lambda: dict(model=ScoreThenBatchedNms(), args=(_boxes(8), torch.rand(8), torch.randint(0, 3, (8,)))),
    ),
    # dynamic dimensions
    "int-of-size-auto": Unseen(
        "pytorch/pytorch#138853",
        "dynamic-dim-specialized",
        lambda: dict(
            model=ResizeToOwnSize(),
            args=(torch.rand(1, 3, 28, 28),),
            dynamic_shapes=({2: Dim.AUTO, 3: Dim.AUTO},),
        ),
    ),
    "int-of-size-named": Unseen(
        "pytorch/pytorch#138853",
        "constraints-violated",
        lambda: dict(
            model=ResizeToOwnSize(),
            args=(torch.rand(1, 3, 28, 28),),
            dynamic_shapes=({2: Dim("h", min=8, max=64), 3: Dim("w", min=8, max=64)},),
        ),
    ),
    "down-up-float-scales": Unseen(
        "pytorch/pytorch#131897",
        "needs-a-multiple",
        lambda: dict(
            model=DownUp(),
            args=(torch.rand(1, 1, 32, 32), torch.rand(1, 1, 32, 32)),
            dynamic_shapes={"x": {2: Dim("d", min=16, max=64)}, "y": {2: Dim("d", min=16, max=64)}},
        ),
    ),
    "position-table-bound": Unseen(
        "pytorch/pytorch#126127",
        "constraints-violated",
        lambda: dict(
            model=PositionEmbedding(), args=(torch.randint(0, 16, (2, 6)),), dynamic_shapes=({1: Dim("seq")},)
        ),
    ),
    "pretraced-graph": Unseen(
        "pytorch/pytorch#134137",
        "constraints-violated",
        lambda: dict(model=_pretraced_broadcast(), args=(torch.rand(5, 1),), dynamic_shapes=({0: Dim("n")},)),
    ),
    "batch-one-example": Unseen(
        "pytorch/pytorch#176349",
        "size-one-specialized",
        lambda: dict(
            model=MatrixOfItself(),
            args=(torch.rand(1, 4),),
            dynamic_shapes=({0: Dim("batch", min=1, max=32)},),
        ),
    ),
    "window-partition": Unseen(
        "pytorch/pytorch#131897",
        "needs-a-multiple",
        lambda: dict(
            model=TwoByTwoPatches(),
            args=(torch.rand(1, 3, 16, 16),),
            dynamic_shapes=({2: Dim("h", min=4, max=64), 3: Dim("w", min=4, max=64)},),
        ),
    ),
    "check-inside-cond-branch": Unseen(
        "pytorch/pytorch#147991",
        "constraints-violated",
        lambda: dict(
            model=EarlyExit(),
            args=(torch.rand(2, 700, 12),),
            dynamic_shapes=({0: Dim("batch_size"), 1: Dim("sequence_length")},),
        ),
    ),
    "strided-slice-related-dims": Unseen(
        "pytorch/pytorch#146315",
        "not-one-guard",
        lambda: dict(
            model=CatPlusStrided(),
            args=(torch.randn(2, 3), torch.randn(2, 5), torch.randn(2, 16)),
            dynamic_shapes={
                "x": {0: Dim("batch"), 1: Dim("dx")},
                "y": {0: Dim("batch"), 1: Dim("dy")},
                "z": {0: Dim("batch"), 1: Dim("dz")},
            },
        ),
    ),
    # inputs, outputs and code
    "dynamic-shapes-missing-key": Unseen(
        "pytorch/pytorch#148564",
        "dynamic-shapes-spec-mismatch",
        lambda: dict(
            model=TwoInputs(),
            args=(),
            kwargs={"start": torch.ones(4, 4), "end": torch.ones(4, 4)},
            dynamic_shapes={"end": {0: Dim("end_dim")}},
        ),
    ),
    # moved to another device (the reader names it: device="cuda")
    "lstm-moved-with-to": Unseen(
        "pytorch/pytorch#151010",
        "device-baked",
        lambda: dict(model=LstmTagger().eval(), args=(torch.rand(2, 5, 8),), device="cuda"),
    ),
    "anchors-moved-with-cuda": Unseen(
        "pytorch/pytorch#126674",
        "device-baked",
        lambda: dict(model=AnchorsPerCell().eval(), args=(torch.rand(1, 3, 32, 48),), device="cuda"),
    ),
    "returns-instances": Unseen(
        "pytorch/pytorch#140615",
        "unflattenable-output",
        lambda: dict(model=PredictsInstances(), args=(torch.rand(3, 5),)),
    ),
    "counter-attribute-advanced": Unseen(
        "meta-llama/llama-models#380",
        "constant-mutated",
        lambda: dict(model=StepCounter(), args=(torch.rand(2, 3),), check_inputs=[(torch.rand(2, 3),)]),
    ),
    "exported-in-training-mode": Unseen(
        "pytorch/pytorch#103681",
        "training-mode-baked",
        lambda: dict(model=DropoutHead(), args=(torch.rand(2, 8),)),
    ),
    "output-class-defined-in-the-script": Unseen(
        "huggingface/transformers#27871",
        "load-needs-registration",
        lambda: dict(model=_segmenter_from_a_script()(), args=(torch.rand(2, 6),)),
    ),
    "custom-op-from-a-module": Unseen(
        "pytorch/pytorch#151746",
        None,
        lambda: dict(model=UsesScaleRows(), args=(torch.rand(3, 4), torch.rand(3))),
    ),
    "returns-dynamic-cache": Unseen(
        "pytorch/pytorch#148748",
        "cache-output",
        lambda: dict(model=ReturnsDynamicCache(), args=(torch.rand(2, 3),)),
    ),
    "numpy-in-forward": Unseen(
        "pytorch/pytorch#148779",
        "numpy-in-forward",
        lambda: dict(model=UsesNumpySum(), args=(torch.randn(10, 10),)),
    ),
    "cache-attribute-written": Unseen(
        "meta-llama/llama-models#380",
        "constant-mutated",
        lambda: dict(model=KeyCache(), args=(torch.rand(1, 8), 1)),
    ),
    "observer-left-in-model": Unseen(
        "pytorch/pytorch#157355",
        "quantization-observer",
        lambda: dict(model=ObservedLinear(), args=(torch.rand(2, 4),)),
    ),
}
