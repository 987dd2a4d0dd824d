"""Failures the doctor was never shown, each modelled on a public report (cited in its docstring).

`tests/doctor_cases.py` holds one reproduction per catalog entry, written together with the entry.
These cases are different: each copies the shape of a real report (a model from an issue thread,
shortened to the lines that fail), and `expected` names the catalog entry a reader of that report
needs, chosen by the cause, not by the message. Where the book has no page for the cause, `expected`
is ``"unclassified"``: the right answer is the doctor saying it does not know, and a confident page is
wrong. `tests/test_doctor_unseen.py` runs them all; the doctor is right on a case when its first
finding is that entry (the root cause first).

Each case is committed before the doctor code that handles it, and a case the doctor misses stays in
the set with its verdict in ``missed``, so `score` measures the doctor on readers' models, not on the
examples it was written for.
"""

from __future__ import annotations

import datetime
import functools
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
import torchvision
from torch import nn
from torch.export import Dim
from unseen_case import Unseen

# What the doctor's report says about a case: its first finding is the expected entry (right),
# another page (wrong page), no page ("unclassified", or no finding where something fails), or the
# run did not finish (an exception out of `diagnose`, a signal, the time limit).
RIGHT, WRONG_PAGE, NO_CAUSE, CRASH = "right", "wrong page", "no cause named", "crash"
VERDICTS = (RIGHT, WRONG_PAGE, NO_CAUSE, CRASH)


def verdict(case: Unseen, kinds: list[str]) -> str:
    """The verdict on a report whose findings have these kinds, in order."""
    first = kinds[0] if kinds else None
    if first == case.expected:
        return RIGHT
    if first in (None, "unclassified"):
        return NO_CAUSE
    return WRONG_PAGE


@dataclass(frozen=True)
class Score:
    """How many cases got each verdict, with precision (right / (right + wrong page)): how often a
    page the doctor names is the right one, and coverage (right / all)."""

    right: int
    wrong_page: int
    no_cause: int
    crash: int

    @property
    def cases(self) -> int:
        return self.right + self.wrong_page + self.no_cause + self.crash

    @property
    def precision(self) -> float:
        named = self.right + self.wrong_page
        return self.right / named if named else 1.0

    @property
    def coverage(self) -> float:
        return self.right / self.cases if self.cases else 0.0

    def line(self) -> str:
        return (
            f"{self.cases} unseen cases: {self.right} right, {self.wrong_page} wrong page, "
            f"{self.no_cause} no cause named, {self.crash} crash; precision {self.precision:.0%}, "
            f"coverage {self.coverage:.0%}"
        )


def score(verdicts: list[str]) -> Score:
    unknown = set(verdicts) - set(VERDICTS)
    if unknown:
        raise ValueError(f"unknown verdict(s) {sorted(unknown)}; a verdict is one of {VERDICTS}")
    return Score(*(verdicts.count(name) for name in VERDICTS))


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
from typing import NamedTuple

import numpy as np

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


# ================================================================== added with issue 50: mistakes in the dynamic_shapes specification itself
class ImageAndText(nn.Module):
    """pytorch/pytorch#148478 ("export dynamic shapes API throws weird error on upper bound."): the
    Flux script's `create_dynamic_shape_v2` gives *one* `Dim("dim")` to every axis of every input
    through `tree_map_only`; reduced to two inputs whose axes have different example sizes."""

    def forward(self, img, txt):
        return img.mean(1) + txt.mean(1)


class ImageEncoder(nn.Module):
    """meta-pytorch/segment-anything-fast#109 ("can't torch.export.export the model and set batch size
    to dynamic"): SAM's image encoder (patch embedding, then an absolute position embedding sized for
    the 1024-pixel input), shrunk to 64 pixels and 16-pixel patches."""

    def __init__(self):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, 8, 16, stride=16)
        self.pos_embed = nn.Parameter(torch.randn(1, 4, 4, 8))

    def forward(self, x):
        x = self.patch_embed(x).permute(0, 2, 3, 1)
        return x + self.pos_embed


class KeywordOnly(nn.Module):
    """pytorch/pytorch#150371 ("Dynamic shapes doesn't work with kwargs"): keyword-only `x`, `y` and a
    `**kwargs` holding `z`, with `dynamic_shapes` keyed by the call's names (`z`), not by the
    signature's (`kwargs`). Raised "top-level keys must be the arg names" then; 2.14.1 accepts it."""

    def forward(self, *, x, y, **kwargs):
        z = kwargs["z"]
        return x.sum() + y.sum() + z.sum()


class ConcatThenLinear(nn.Module):
    """pytorch/pytorch#172561 ("Dynamo export to ONNX with dynamic shapes for LLMs fail with 'Attempted
    to negate'"): tokens and a KV-cache-like input concatenated and fed to a `Linear(32, ...)`, each
    given its own `Dim`; the code ties them (`y_dim = 32 - x_dim`), which no `Dim` can say."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(32, 16)

    def forward(self, x, y):
        return self.linear(torch.cat([x, y], dim=1))


class ViewByInt(nn.Module):
    """pytorch/pytorch#106031 ("torch._dynamo.export does not support symbolic int inputs"):
    `x.view(i) + 2` with a Python int `i`, here given a named `Dim` in `dynamic_shapes` so that it
    would be symbolic."""

    def forward(self, x, i):
        return x.view(i) + 2


class CroppedPosEmbed(nn.Module):
    """pytorch/pytorch#144852 ("[torch.export] Error When Trying To Express Dynamism For Transformer
    Model of SD3"): SD3's `PatchEmbed` (2x2 patches, a position embedding cropped from a
    `pos_embed_max_size` grid) and the final unpatchify, with `Dim("fm_height", min=16)` and
    `Dim("fm_width", min=16)` on the latent and no `max`. On 2.14.1 the violation is the range: the
    crop from the grid bounds the latent (`Dim('fm_height', min=16, max=33)` suggested)."""

    def __init__(self, patch=2, max_size=16, dim=8):
        super().__init__()
        self.patch, self.max_size = patch, max_size
        self.proj = nn.Conv2d(4, dim, patch, stride=patch)
        self.pos_embed = nn.Parameter(torch.randn(1, max_size * max_size, dim))
        self.proj_out = nn.Linear(dim, patch * patch * 4)

    def cropped_pos_embed(self, height, width):
        height, width = height // self.patch, width // self.patch
        if height > self.max_size:
            raise ValueError("height larger than pos_embed_max_size")
        if width > self.max_size:
            raise ValueError("width larger than pos_embed_max_size")
        top, left = (self.max_size - height) // 2, (self.max_size - width) // 2
        grid = self.pos_embed.reshape(1, self.max_size, self.max_size, -1)
        grid = grid[:, top : top + height, left : left + width, :]
        return grid.reshape(1, -1, grid.shape[-1])

    def forward(self, hidden_states):
        height, width = hidden_states.shape[-2:]
        x = self.proj(hidden_states).flatten(2).transpose(1, 2)
        x = self.proj_out(x + self.cropped_pos_embed(height, width))
        h, w = height // self.patch, width // self.patch
        x = x.reshape(-1, h, w, self.patch, self.patch, 4)
        x = torch.einsum("nhwpqc->nchpwq", x)
        return x.reshape(-1, 4, h * self.patch, w * self.patch)


class PadToLarger(nn.Module):
    """pytorch/pytorch#150851 ("Cannot export torch.sym_max(x.shape[0], y.shape[0])"): a zero canvas as
    large as the larger of two inputs, each written into it, exported with `Dim.DYNAMIC` on all four
    axes. The program keeps which input was the larger one at export, and refuses the other way round
    (the report's "case 2 failed")."""

    def forward(self, x, y):
        s1 = max(x.shape[0], y.shape[0])
        s2 = max(x.shape[1], y.shape[1])
        z = torch.zeros((s1, s2), dtype=x.dtype)
        z[: x.shape[0], : x.shape[1]] = x
        z[: y.shape[0], : y.shape[1]] += y
        return z


def _one_dim_everywhere():
    dim = Dim("dim")
    return ({0: dim, 1: dim, 2: dim}, {0: dim, 1: dim, 2: dim})


def _independent_dims():
    return {"x": {1: Dim("x_dim", min=1, max=31)}, "y": {1: Dim("y_dim", min=1, max=31)}}


_DYN = Dim.DYNAMIC


# ================================================================== added with issue 50: in-place writes and state, saving and loading, control-flow operators
# ------------------------------------------------------------------ in-place writes and state
class StateTimesInput(nn.Module):
    """pytorch/executorch#4042 ("Mutable Buffer Should Only Be Updated by In-Place Op"): a float16
    buffer multiplied and shifted in place on every call, then read. The buffer is registered, so the
    program writes it back (`BUFFER_MUTATION`) and matches eager, provided both start from the same
    state: the eager reference run itself advances the state."""

    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.tensor(np.array([7, 5, 6], dtype=np.float16)))

    def forward(self, x):
        x = x.type(torch.float16)
        self.state.mul_(x)
        self.state.add_(torch.tensor(np.array([1, 2, 3], dtype=np.float16)))
        return self.state * 9


class HalveWeightEachCall(nn.Module):
    """pytorch/pytorch#159623 ("grad change + forward in export"): a parameter divided in place under
    `torch.no_grad()` inside `forward`. On 2.14.1 export passes; the decomposed program raises "a leaf
    Variable that requires grad is being used in an in-place operation" when it runs."""

    def __init__(self):
        super().__init__()
        self.parameter = nn.Parameter(torch.rand(4, 4))

    def forward(self, x):
        with torch.no_grad():
            self.parameter.div_(2)
        return x + self.parameter


class ConvBnHead(nn.Module):
    """microsoft/onnxscript#1791 ("[Pattern] BatchNorm training=True -> False"): an inference model
    exported without `.eval()`; the program keeps `batch_norm` in training mode and updates
    `running_mean`/`running_var`, as the thread found."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


# ------------------------------------------------------------------ saving and loading programs
@dataclass
class MyStaticInput:
    int_1: int
    int_2: int


class AddsConfigInts(nn.Module):
    """pytorch/pytorch#147400 ("torch.export doesn't provide useful error message when someone uses
    unrecognized dataclass as input"): an unregistered dataclass of two ints passed as an argument."""

    def forward(self, x, x1):
        return x + x1.int_1 + x1.int_2


class Heads(NamedTuple):
    logits: torch.Tensor
    boxes: torch.Tensor


class ReturnsNamedTuple(nn.Module):
    """pytorch/pytorch#109460 ("[BUG][pytree] treespec serialization for locally defined classes and
    namedtuple types"): the model returns a user `NamedTuple`; export and the program's runs pass,
    `torch.export.save` refuses its treespec ("Can't serialize TreeSpec of namedtuple class ... we
    didn't register a serialized_type_name")."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 4)

    def forward(self, x):
        h = self.fc(x)
        return Heads(h.softmax(-1), h.sigmoid())


# ------------------------------------------------------------------ control-flow operators
class CondReluIdentityBranch(nn.Module):
    """pytorch/pytorch#141259 ("Consider relaxing torch.cond's requirement that the outputs of each
    branch have matching requires_grad metadata"): `cond_relu`, whose true branch returns its operand
    as it is (`lambda x: x`). With an input that requires grad, the eager call already fails: "Higher
    order ops do not support aliasing". (The report's `-torch.ones((), requires_grad=True)` is not a
    leaf, which `copy.deepcopy` refuses; a leaf with the same value keeps the case about `cond`.)"""

    def forward(self, x):
        return torch.cond(x > 0, lambda x: x, lambda _: torch.zeros_like(x), [x])


def _branch_with_a_tensor(x):
    torch.tensor(0)  # a tensor built inside the branch; the report: "works without this line"
    return x.clone()


class CondBranchBuildsTensor(nn.Module):
    """pytorch/pytorch#180354 ("`torch.cond` with tensors created in `[true/false]_fn` fails during
    `run_decompositions`"): export passes; `run_decompositions()` fails with "Attempting to use
    FunctionalTensor on its own"."""

    def forward(self, x):
        return torch.cond(x.any(), _branch_with_a_tensor, _branch_with_a_tensor, (x,))


class RawWhileLoopHop(nn.Module):
    """pytorch/pytorch#174013 ("[export] While HOP export error"): `torch.ops.higher_order.while_loop`
    called directly, its condition reading a buffer and its body a `Linear`, with no
    `additional_inputs`. The closures are not lifted: the program fails to run, to decompose and to
    save (`torch.while_loop` lifts them and exports clean)."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(2, 2)
        self.dec = nn.Buffer(torch.tensor(1))

    def forward(self, iter, x):
        def cond_fn(it, x):
            return it - self.dec > 0

        def body_fn(it, x):
            return it - 1, self.linear(x)

        return torch.ops.higher_order.while_loop(cond_fn, body_fn, [iter, x], [])


class CountedLoopOverBuffers(nn.Module):
    """pytorch/pytorch#182036 ("torch.while_loop()'s body_fn is not allowed to return nothing"): a loop
    with no carried values, whose condition advances a buffer counter and whose body decrements
    another buffer in place. The eager call already fails: "Higher order ops do not support input
    mutation"."""

    def __init__(self):
        super().__init__()
        self.register_buffer("counter", torch.tensor(0))
        self.register_buffer("buf", torch.ones(8))

    def forward(self, x):
        def cond_fn():
            self.counter.add_(1)
            return self.counter < 3

        def body_fn():
            self.buf.add_(-1)
            return ()

        torch.while_loop(cond_fn, body_fn, ())
        return x + self.buf


# ================================================================== added with issue 50: operators export cannot take, and torch crashing outright
# ------------------------------------------------------------------ operators export cannot take
class EagerQuantizedLinear(nn.Module):
    """An eager-mode quantized model (QuantStub, Linear, ReLU, DeQuantStub) passed through
    `torch.ao.quantization.prepare` and `convert`, then to export: pytorch/pytorch#137111
    ("[export] Fails to export a quantized model"). The converted `quantized.Linear` holds its weight
    in a TorchBind `LinearPackedParamsBase`, which export cannot fakify (no `__obj_flatten__`)."""

    def __init__(self):
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.linear = nn.Linear(4, 8)
        self.relu = nn.ReLU()
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        return self.dequant(self.relu(self.linear(self.quant(x))))


def quantized_linear():
    model = EagerQuantizedLinear().eval()
    model.qconfig = torch.ao.quantization.get_default_qconfig("x86")
    prepared = torch.ao.quantization.prepare(model)
    prepared(torch.randn(1, 1, 4))
    return torch.ao.quantization.convert(prepared)


class JaggedFromValues(nn.Module):
    """A nested (jagged) tensor built in `forward` from values and offsets:
    pytorch/pytorch#149605 ("torch.onnx.export does not support nested tensor operations"), whose
    dynamo path fails inside `torch.export.export`; `nested_tensor_from_jagged` refuses to be traced."""

    def forward(self, values, offsets):
        return torch.nested.nested_tensor_from_jagged(values, offsets)


class SparseCsrList(nn.Module):
    """Each input converted with `.to_sparse_csr()`: pytorch/pytorch#123345 ("torch.export does not
    support Sparse CSR tensors"). Reported failing in fake tensor dispatch; on 2.14.1 it exports and
    runs (equal to eager), but `torch.export.save` still fails: SerializeError on `aten.to_sparse_csr`."""

    def forward(self, x):
        return [xi.to_sparse_csr() for xi in x]


class SecondOfNow(nn.Module):
    """A value read from the clock in `forward`: pytorch/pytorch#125171 ("datettime.now() is not
    supported by Dynamo"). A maintainer notes non-strict export now runs it once and bakes `.second`
    as a constant, while strict export still stops at the skipped builtin `datetime.now`."""

    def forward(self, x):
        return x * (datetime.datetime.now().second % 7 + 1)


# ------------------------------------------------------------------ only after run_decompositions
_closure_norm = nn.InstanceNorm1d(4, track_running_stats=True)


class ClosureInstanceNorm(nn.Module):
    """An `InstanceNorm` with running statistics reached from a closure, not a submodule:
    pytorch/pytorch#197096 ("[export][aoti] mutated lifted constant (instance_norm running stats
    captured from closure): export succeeds, run_decompositions raises, ..."). Export lifts the
    stats as constants and keeps the in-place update; `run_decompositions()` refuses a mutated
    constant ("Pls register it as buffer")."""

    def forward(self, x):
        return _closure_norm(x)


# ------------------------------------------------------------------ torch crashes outright
class BatchNormNoStats(nn.Module):
    """`aten.native_batch_norm` in eval mode (`training=False`) with no running statistics:
    pytorch/pytorch#194014 ("native_batch_norm segfaults on CPU when running_mean and running_var are
    None in inference mode"). Eager dies with SIGSEGV on 2.14.1; export's decomposition raises."""

    def forward(self, x):
        return torch.ops.aten.native_batch_norm(x, None, None, None, None, False, 0.1, 1e-5)[0]


class BatchNormEmptyVar(nn.Module):
    """`torch.native_batch_norm` in training mode with an empty `running_var` (here a buffer, as a bad
    state dict leaves it): pytorch/pytorch#169208 ("Segmentation fault in torch.native_batch_norm with
    empty running_var tensor"). Eager dies with SIGSEGV on 2.14.1; export's fake kernel raises a
    broadcast error."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(8))
        self.bias = nn.Parameter(torch.zeros(8))
        self.register_buffer("running_mean", torch.zeros(8))
        self.register_buffer("running_var", torch.ones(0))

    def forward(self, x):
        return torch.native_batch_norm(
            x, self.weight, self.bias, self.running_mean, self.running_var, True, 0.1, 1e-5
        )[0]


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
    # added with issue 50: mistakes in the dynamic_shapes specification itself
    "one-dim-every-axis": Unseen(
        "pytorch/pytorch#148478",
        "unclassified",
        lambda: dict(
            model=ImageAndText(),
            args=(torch.randn(2, 16, 8), torch.randn(2, 5, 8)),
            dynamic_shapes=_one_dim_everywhere(),
        ),
    ),
    "spec-in-extra-tuple": Unseen(
        "meta-pytorch/segment-anything-fast#109",
        "dynamic-shapes-spec-mismatch",
        lambda: dict(
            model=ImageEncoder().eval(),
            args=(torch.randn(2, 3, 64, 64),),
            dynamic_shapes=(({0: Dim("batch")},),),
        ),
    ),
    "height-against-fixed-pos-embed": Unseen(
        "meta-pytorch/segment-anything-fast#109",
        "constraints-violated",
        lambda: dict(
            model=ImageEncoder().eval(),
            args=(torch.randn(2, 3, 64, 64),),
            dynamic_shapes=({0: Dim("batch"), 2: Dim("h"), 3: Dim("w")},),
        ),
    ),
    "kwargs-spec-by-call-names": Unseen(
        "pytorch/pytorch#150371",
        None,
        lambda: dict(
            model=KeywordOnly(),
            args=(),
            kwargs={"x": torch.randn(4, 4), "y": torch.randn(4, 4), "z": torch.rand(4, 4)},
            dynamic_shapes={k: {0: Dim.AUTO, 1: Dim.AUTO} for k in ("x", "y", "z")},
        ),
    ),
    "concat-dims-tied-by-linear": Unseen(
        "pytorch/pytorch#172561",
        "constraints-violated",
        lambda: dict(
            model=ConcatThenLinear(),
            args=(torch.randn(1, 10), torch.randn(1, 22)),
            dynamic_shapes=_independent_dims(),
        ),
    ),
    "named-dim-on-int": Unseen(
        "pytorch/pytorch#106031",
        "unclassified",
        lambda: dict(
            model=ViewByInt(),
            args=(torch.randn(3, 3), 9),
            dynamic_shapes=({0: Dim("a"), 1: Dim("b")}, Dim("i")),
        ),
    ),
    "cropped-pos-embed-min-only": Unseen(
        "pytorch/pytorch#144852",
        "constraints-violated",
        lambda: dict(
            model=CroppedPosEmbed().eval(),
            args=(torch.randn(2, 4, 16, 16),),
            dynamic_shapes={"hidden_states": {2: Dim("fm_height", min=16), 3: Dim("fm_width", min=16)}},
        ),
    ),
    "max-of-two-sizes": Unseen(
        "pytorch/pytorch#150851",
        "unclassified",
        lambda: dict(
            model=PadToLarger(),
            args=(torch.arange(6).reshape(2, 3), torch.arange(6).reshape(3, 2) * 10),
            dynamic_shapes=({0: _DYN, 1: _DYN}, {0: _DYN, 1: _DYN}),
            check_inputs=[(torch.arange(4).reshape(2, 2), torch.arange(9).reshape(3, 3))],
        ),
    ),
    # added with issue 50: in-place writes and state, saving and loading, control-flow operators
    "buffer-state-multiplied-in-place": Unseen(
        "pytorch/executorch#4042",
        None,
        lambda: dict(model=StateTimesInput(), args=(torch.tensor([1.0, 2.0, 0.5]),)),
    ),
    "parameter-halved-under-no-grad": Unseen(
        "pytorch/pytorch#159623",
        "unclassified",
        lambda: dict(model=HalveWeightEachCall(), args=(torch.rand(4, 4),)),
    ),
    "batchnorm-exported-in-training": Unseen(
        "microsoft/onnxscript#1791",
        "training-mode-baked",
        lambda: dict(model=ConvBnHead(), args=(torch.rand(2, 3, 8, 8),)),
    ),
    "unregistered-dataclass-input": Unseen(
        "pytorch/pytorch#147400",
        "unsupported-input-type",
        lambda: dict(model=AddsConfigInts(), args=(torch.randn(1), MyStaticInput(1, 2))),
    ),
    "namedtuple-output-saved": Unseen(
        "pytorch/pytorch#109460",
        "pytree-serialization-name",
        lambda: dict(model=ReturnsNamedTuple(), args=(torch.rand(3, 6),)),
    ),
    "cond-branch-returns-operand": Unseen(
        "pytorch/pytorch#141259",
        "loop-aliasing",
        lambda: dict(model=CondReluIdentityBranch(), args=(torch.full((), -1.0, requires_grad=True),)),
    ),
    "cond-operand-not-a-leaf": Unseen(
        "pytorch/pytorch#141259",
        "loop-aliasing",
        # the report's own input: negated, so not a leaf of the autograd graph
        lambda: dict(model=CondReluIdentityBranch(), args=(-torch.ones((), requires_grad=True),)),
    ),
    "cond-branch-builds-tensor": Unseen(
        "pytorch/pytorch#180354",
        "unclassified",
        lambda: dict(model=CondBranchBuildsTensor(), args=(torch.ones(3),)),
    ),
    "raw-while-loop-closures": Unseen(
        "pytorch/pytorch#174013",
        "unclassified",
        lambda: dict(model=RawWhileLoopHop(), args=(torch.tensor(3), torch.tensor([[1.0, 2.0], [3.0, 4.0]]))),
    ),
    "while-loop-advances-buffers": Unseen(
        "pytorch/pytorch#182036",
        "loop-input-mutation",
        lambda: dict(model=CountedLoopOverBuffers(), args=(torch.zeros(8),)),
    ),
    # added with issue 50: operators export cannot take, and torch crashing outright
    "eager-quantized-packed-params": Unseen(
        "pytorch/pytorch#137111",
        "unclassified",
        lambda: dict(model=quantized_linear(), args=(torch.randn(1, 1, 4),)),
    ),
    "jagged-from-values": Unseen(
        "pytorch/pytorch#149605",
        "unclassified",
        lambda: dict(model=JaggedFromValues(), args=(torch.randn(12, 5), torch.tensor([0, 3, 5, 6, 10, 12]))),
    ),
    "to-sparse-csr-list": Unseen(
        "pytorch/pytorch#123345",
        "unclassified",
        lambda: dict(model=SparseCsrList(), args=([torch.randn(3, 3) for _ in range(3)],)),
    ),
    "datetime-now-strict": Unseen(
        "pytorch/pytorch#125171",
        "skipped-function",
        lambda: dict(model=SecondOfNow(), args=(torch.randn(2, 3),), strict=True),
    ),
    "closure-norm-stats-mutated": Unseen(
        "pytorch/pytorch#197096",
        "constant-mutated",
        lambda: dict(model=ClosureInstanceNorm(), args=(torch.randn(2, 4, 8),)),
    ),
    "batch-norm-no-stats-segfault": Unseen(
        "pytorch/pytorch#194014",
        "unclassified",
        lambda: dict(model=BatchNormNoStats(), args=(torch.randn(9, 2, 8, 8),)),
    ),
    "batch-norm-empty-var-segfault": Unseen(
        "pytorch/pytorch#169208",
        "unclassified",
        lambda: dict(model=BatchNormEmptyVar(), args=(torch.randn(10, 8),)),
    ),
}


# Cases from helpers who never read the doctor's code (tests/doctor_unseen_fresh.py), scored with the rest.
from doctor_unseen_fresh import FRESH  # noqa: E402

UNSEEN.update(FRESH)
# A second batch from two more such helpers (2026-11-29), committed with the doctor's verdicts before
# any code was changed for them.
from doctor_unseen_fresh2_a import FRESH2_A  # noqa: E402
from doctor_unseen_fresh2_b import FRESH2_B  # noqa: E402

UNSEEN.update(FRESH2_A)
UNSEEN.update(FRESH2_B)

# Met on the real packages of issue 52 (tests/doctor_unseen_packages.py), written before any code
# that handles them.
from doctor_unseen_packages import PACKAGES  # noqa: E402

UNSEEN.update(PACKAGES)

# Inputs that differ from the example only in dtype or memory layout (tests/doctor_unseen_layouts.py,
# 2026-12-01), written before any code that handles them.
from doctor_unseen_layouts import LAYOUTS  # noqa: E402

UNSEEN.update(LAYOUTS)

# Aten operators whose output size depends on the data (tests/doctor_unseen_aten.py, 2026-12-02),
# written before any code that handles them.
from doctor_unseen_aten import ATEN  # noqa: E402

UNSEEN.update(ATEN)
