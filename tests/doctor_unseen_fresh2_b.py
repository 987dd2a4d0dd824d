"""Unseen cases written on 2026-11-29 by a helper who never read the doctor's code or the catalog's
patterns: only the catalog's entry titles, to choose each case's `expected` by its cause. Each model
is the few lines of a public report that matter (cited first in its docstring, with what torch
2.14.1 did with it on the CPU). Second round, batch B: vision models readers ship (YOLO blocks,
DETR and RetinaNet post-processing, a U-Net decoder, a pixel-based actor), errors met after export
(the program called with another dtype, AOTInductor packaging), strict export on Python features
(generators, timing context managers, f-string asserts, a user class's operator), a distribution
that validates its arguments, and a custom operator whose fake kernel promises the wrong shape.
"""

from __future__ import annotations

import contextlib
import functools
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.export import Dim
from unseen_case import Unseen


# ------------------------------------------------------------------ YOLO blocks and heads
class SppfGenerator(nn.Module):
    """pytorch/pytorch#148144 (Torch export does not preserve original edges between nodes): YOLOv5's
    SPPF block, whose max-pools are chained by a generator, `y.extend(self.m(y[-1]) for _ in
    range(3))`; the graph torch.export produced (first reported on the ExecuTorch side,
    pytorch/executorch#8758) did not wire the pools one after the other as the source does
    (pytorch/pytorch#130975 is the same family: strict export of a generator reading the list it
    extends).

    2.14.1: strict export is clean; the graph chains the three `max_pool2d` nodes and the program
    equals eager. Kept with expected=None."""

    def __init__(self, c1=8, c2=8, k=5):
        super().__init__()
        c_ = c1 // 2
        self.cv1 = nn.Conv2d(c1, c_, 1, 1)
        self.cv2 = nn.Conv2d(c_ * 4, c2, 1, 1)
        self.m = nn.MaxPool2d(kernel_size=k, stride=1, padding=k // 2)

    def forward(self, x):
        y = [self.cv1(x)]
        y.extend(self.m(y[-1]) for _ in range(3))
        return self.cv2(torch.cat(y, 1))


class Profile(contextlib.ContextDecorator):
    """YOLOv5's `utils.general.Profile`, the timer `AutoShape.forward` opens around each stage."""

    def __init__(self, t=0.0):
        self.t = t
        self.cuda = torch.cuda.is_available()

    def __enter__(self):
        self.start = self.time()
        return self

    def __exit__(self, type, value, traceback):
        self.dt = self.time() - self.start
        self.t += self.dt

    def time(self):
        if self.cuda:
            torch.cuda.synchronize()
        return time.time()


class AutoShapeTimed(nn.Module):
    """pytorch/executorch#1330 (Quantization of yolov5 for XNNPACK backend): the model loaded with
    `torch.hub.load("ultralytics/yolov5", ...)` is wrapped in `AutoShape`, whose forward times each
    stage with `with dt[0]:` on a `Profile` object; the export stopped at `torch._dynamo.exc.
    Unsupported: SETUP_WITH UserDefinedObjectVariable(Profile)`. Reduced to the three timed stages
    around one convolution.

    2.14.1: eager runs and non-strict export passes; strict export raises `torch._dynamo.exc.
    Unsupported: Attempted to call function marked as skipped ... Dynamo does not know how to trace
    the builtin `time.time.`` (from `Profile.__enter__`)."""

    def __init__(self):
        super().__init__()
        self.model = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, ims):
        dt = (Profile(), Profile(), Profile())
        with dt[0]:
            x = ims / 255
        with dt[1]:
            y = self.model(x)
        with dt[2]:
            y = y.sigmoid()
        return y


# ------------------------------------------------------------------ detection post-processing
def _topk_min(input: torch.Tensor, orig_kval: int, axis: int) -> int:
    """torchvision's `det_utils._topk_min` (its tracing branch left out): `k` bounded by the count."""
    return min(orig_kval, input.size(axis))


class RetinaNetLevelTopk(nn.Module):
    """pytorch/pytorch#108805 (Export torchvision detection model retinanet_resnet50_fpn): the
    per-level post-processing of torchvision's RetinaNet, which `torch._dynamo.export` could not take
    (f-string messages in `torch._assert`, then the data-dependent sizes): scores above a threshold
    kept with a boolean mask, `torch.where(keep)[0]`, `topk` of `min(1000, count)`, anchor index and
    label recovered from the flat index. Exported strict, as the report's Dynamo export did.

    2.14.1: strict export is clean, and the program equals eager both on the example and on logits
    shifted so that far fewer scores pass (94 of 200 kept instead of 200). Kept with expected=None."""

    score_thresh = 0.05
    topk_candidates = 1000

    def forward(self, logits_per_level, box_regression_per_level):
        num_classes = logits_per_level.shape[-1]
        torch._assert(
            logits_per_level.dim() == 2,
            f"expecting a 2-d tensor of logits instead got {logits_per_level.shape}",
        )
        scores_per_level = torch.sigmoid(logits_per_level).flatten()
        keep_idxs = scores_per_level > self.score_thresh
        scores_per_level = scores_per_level[keep_idxs]
        topk_idxs = torch.where(keep_idxs)[0]
        num_topk = _topk_min(topk_idxs, self.topk_candidates, 0)
        scores_per_level, idxs = scores_per_level.topk(num_topk)
        topk_idxs = topk_idxs[idxs]
        anchor_idxs = torch.div(topk_idxs, num_classes, rounding_mode="floor")
        labels_per_level = topk_idxs % num_classes
        return box_regression_per_level[anchor_idxs], scores_per_level, labels_per_level


def _retinanet_level() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(50, 4, generator=generator), torch.randn(50, 4, generator=generator)


def _retinanet_case() -> dict:
    logits, boxes = _retinanet_level()
    return dict(
        model=RetinaNetLevelTopk().eval(),
        args=(logits, boxes),
        strict=True,
        check_inputs=[(logits - 3, boxes)],  # far fewer scores pass the threshold
    )


class DetrTopkScores(nn.Module):
    """pytorch/pytorch#197104 ([aoti] `aoti_compile_and_package` fails for any model returning a
    `torch.return_types.*` named tuple): DETR's post-processing selects the best queries with
    `prob.view(b, -1).topk(num_select, dim=1)`; here the `torch.return_types.topk` is returned as it
    is, then packaged with AOTInductor.

    2.14.1: eager and `torch.export.export` return the `torch.return_types.topk` and
    `program.module()` runs; `torch._inductor.aoti_compile_and_package` raises
    `NotImplementedError: No registered serialization name for <class 'torch.return_types.topk'>
    found. Please update your _register_pytree_node call with a `serialized_type_name` kwarg` (about
    1 s, before any compilation); `torch.export.save` raises the same."""

    def __init__(self, hidden=8, num_classes=5, num_select=10):
        super().__init__()
        self.class_embed = nn.Linear(hidden, num_classes)
        self.num_select = num_select

    def forward(self, hs):
        prob = self.class_embed(hs).sigmoid()
        return prob.flatten(1).topk(self.num_select, dim=1)


# ------------------------------------------------------------------ segmentation, pixel control
class UNetPadTo64(nn.Module):
    """microsoft/onnxscript#2539 (Dynamic Padding bug, with a minimal fix!): a U-Net exported with
    `dynamo=True` and H, W dynamic in [64, 128]; forward pads the image up to a multiple of 64
    (`I_aligned`), then the decoder concatenates `self.upsample(x)` with the skip features and with
    `I_aligned` (`torch.cat([self.upsample(x), I_aligned], 1)`); export added guards from `_cat_meta`
    on the padded sizes. Two levels and 8 channels, a reduction of the report's deeper network.

    2.14.1: eager runs (100x90 in, 128x128 out). `torch.export.export` (strict or not) raises
    `AssertionError: Cannot create Dim with inconsistent min=2, max=2`, from
    `prettify_results`/`_process_derived_dim_roots` while it writes the suggested fixes for the
    guards `Eq(((s + Mod(64 - Mod(s, 64), 64))//2), 2*(... //4))`: the cat needs the padded size
    to be a multiple of 4, which the padding guarantees but the symbolic shapes cannot show. Without
    the padding the same model fails with the plain `Constraints violated (H)! ... H = 4*_H`."""

    def __init__(self):
        super().__init__()
        self.enc1 = nn.Conv2d(3, 8, 3, padding=1)
        self.enc2 = nn.Conv2d(8, 8, 3, padding=1)
        self.dec2 = nn.Conv2d(16, 8, 3, padding=1)
        self.dec1 = nn.Conv2d(11, 3, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.upsample = nn.Upsample(scale_factor=2, mode="nearest")

    def forward(self, I):  # noqa: E741 - the report's name
        h, w = I.shape[2], I.shape[3]
        pad_h = (64 - h % 64) % 64
        pad_w = (64 - w % 64) % 64
        I_aligned = F.pad(I, (0, pad_w, 0, pad_h), mode="replicate")
        x_full = F.relu(self.enc1(I_aligned))
        x_half = F.relu(self.enc2(self.pool(x_full)))
        x = self.pool(x_half)
        x = F.relu(self.dec2(torch.cat([self.upsample(x), x_half], 1)))
        return self.dec1(torch.cat([self.upsample(x), I_aligned], 1))


class SquashedNormal(torch.distributions.TransformedDistribution):
    """DrQ's action distribution: a Normal squashed by tanh, whose `mean` is the tanh of the loc."""

    def __init__(self, loc, scale):
        self.loc = loc
        self.scale = scale
        self.base_dist = torch.distributions.Normal(loc, scale)
        super().__init__(self.base_dist, [torch.distributions.transforms.TanhTransform(cache_size=1)])

    @property
    def mean(self):
        mu = self.loc
        for tr in self.transforms:
            mu = tr(mu)
        return mu


class DrqActor(nn.Module):
    """pytorch/pytorch#135061 ([export] non-strict export error on torch.distributions.Normal): the
    torchbench models `drq` and `soft_actor_critic` fail non-strict export (strict passed then) at
    `torch.distributions.Normal(loc, scale)`, with a data-dependent expression. DrQ's actor: a
    convolutional encoder of the pixel observation, a trunk, a policy head giving mean and log-std,
    and the `SquashedNormal` whose mean is returned.

    2.14.1: eager runs. Non-strict export raises `GuardOnDataDependentSymNode: Could not guard on
    data-dependent expression Eq(u0, 1)` at `self.base_dist = torch.distributions.Normal(loc,
    scale)`: the distribution validates its arguments (`validate_args`, on by default) and branches
    on the result, first `constraints.real` on `loc` (`(loc == loc).all()`, no NaN). (Strict export
    now fails too, earlier: `Unsupported: Attempted to call function marked as skipped ...
    is_dependent` in `torch/distributions/constraints.py`.)"""

    def __init__(self, action_dim=2, feature_dim=8):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.Flatten())
        self.trunk = nn.Sequential(nn.Linear(8 * 7 * 7, feature_dim), nn.LayerNorm(feature_dim))
        self.policy = nn.Linear(feature_dim, 2 * action_dim)
        self.log_std_min, self.log_std_max = -10, 2

    def forward(self, obs):
        h = torch.tanh(self.trunk(self.encoder(obs)))
        mu, log_std = self.policy(h).chunk(2, dim=-1)
        log_std = torch.tanh(log_std)
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (log_std + 1)
        dist = SquashedNormal(mu, log_std.exp())
        return dist.mean


# ------------------------------------------------------------------ calling the program
class Bf16InputToFloat(nn.Module):
    """pytorch/pytorch#151001 ([PT2] Model Functional Regression due to
    _insert_aten_to_metadata_assert_pass): `x = x.to(torch.float32)` then a Linear and tanh, exported
    with a bfloat16 example, then called with a float32 input (the report compiles
    `export_for_training(...).module()` and calls it with float32 after PT2E quantization).

    2.14.1: eager runs with either dtype; export passes and records
    `aten._assert_tensor_metadata(x, dtype=torch.bfloat16, ...)` before the `to`; `program.module()`
    called with float32 raises `RuntimeError: Tensor dtype mismatch! Expected: BFloat16, Got:
    float`."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 3)

    def forward(self, x):
        x = x.to(torch.float32)
        x = self.linear(x)
        return torch.nn.functional.tanh(x)


class MyTensor:
    """The report's wrapper: a plain Python class holding a tensor, with `__mul__`."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __mul__(self, rhs):
        return self.tensor * rhs


class WrapperTimesTensor(nn.Module):
    """pytorch/pytorch#136757 (torch.export.export fails to trace through a binary operator): forward
    builds a `MyTensor` (a user class whose `__mul__` multiplies its tensor) and returns
    `my_tensor * t`; export, strict by default then, failed on the `*`.

    2.14.1: eager and non-strict export run; strict export still raises `torch._dynamo.exc.
    Unsupported: Failed to convert args/kwargs to proxy ... Missing `as_proxy()` implementation for
    some arg/kwarg ... call_function args: UserDefinedObjectVariable(MyTensor) TensorVariable()`:
    Dynamo does not route the operator to the class's `__mul__`. Not a skipped function, input or
    output type: unclassified."""

    def forward(self, t):
        my_tensor = MyTensor(torch.ones_like(t))
        return my_tensor * t


# ------------------------------------------------------------------ a fake kernel that lies
def _square_fn_meta(query: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(query)  # the report's Meta kernel: the input's shape


def _square_fn_real(query: torch.Tensor) -> torch.Tensor:
    return torch.cat([query, query * query], dim=-1)  # the real kernel: twice as wide


@functools.cache
def _square_fn_library() -> torch.library.Library:
    """Define `casebook_fresh2b::square_fn` once per process, when a case first needs it."""
    lib = torch.library.Library("casebook_fresh2b", "FRAGMENT")
    lib.define("square_fn(Tensor q) -> Tensor")
    lib.impl("square_fn", _square_fn_meta, "Meta")
    lib.impl("square_fn", _square_fn_real, "CPU")
    lib.impl("square_fn", _square_fn_real, "CUDA")
    return lib


class SliceOfWiderOutput(nn.Module):
    """pytorch/pytorch#154537 ([AOTI] view isn't guarded for output of a custom op): an operator
    defined with `torch.library.define`, a Meta kernel returning `torch.empty_like(query)` and a
    device kernel returning a wider tensor; the `.view` that should have failed on the real output
    ran. The report's `.view(x.shape)` also fails in eager, so here the model slices the output back
    to the input's width, a slice the Meta shape makes look like a no-op.

    2.14.1: eager returns (4, 8); export passes, the graph keeps only `aten.alias` of the op's output
    (the slice is dropped), and `program.module()` returns (4, 16): the op's real width."""

    def forward(self, x):
        return torch.ops.casebook_fresh2b.square_fn(x)[:, : x.shape[1]]


def _wider_output_case() -> dict:
    _square_fn_library()
    return dict(model=SliceOfWiderOutput(), args=(torch.randn(4, 8),))


FRESH2_B = {
    "sppf-generator-strict": Unseen(
        "pytorch/pytorch#148144",
        None,
        lambda: dict(model=SppfGenerator().eval(), args=(torch.randn(1, 8, 10, 10),), strict=True),
    ),
    "yolov5-profile-timer-strict": Unseen(
        "pytorch/executorch#1330",
        "skipped-function",
        lambda: dict(model=AutoShapeTimed().eval(), args=(torch.rand(1, 3, 16, 16) * 255,), strict=True),
    ),
    "retinanet-level-topk-strict": Unseen(
        "pytorch/pytorch#108805",
        None,
        _retinanet_case,
    ),
    "detr-topk-returned-to-aoti": Unseen(
        "pytorch/pytorch#197104",
        "structseq-output",
        lambda: dict(model=DetrTopkScores().eval(), args=(torch.randn(1, 12, 8),), aoti=True),
    ),
    "unet-pad-to-64-dynamic": Unseen(
        "microsoft/onnxscript#2539",
        "needs-a-multiple",
        lambda: dict(
            model=UNetPadTo64().eval(),
            args=(torch.rand(1, 3, 100, 90),),
            dynamic_shapes={"I": {2: Dim("H", min=64, max=128), 3: Dim("W", min=64, max=128)}},
        ),
        missed="no cause named: unclassified, for torch's own AssertionError while writing suggested fixes (Cannot create Dim with inconsistent min=2, max=2)",
    ),
    "drq-actor-normal-validates": Unseen(
        "pytorch/pytorch#135061",
        "data-dependent-guard",
        lambda: dict(model=DrqActor().eval(), args=(torch.rand(2, 3, 16, 16),)),
    ),
    # Written expecting runtime-assert-failed, the nearest title the catalog had (2026-11-29), and
    # missed ("no cause named"); example-dtype-assumed (2026-12-01) is this cause's own entry.
    "bf16-program-fed-float32": Unseen(
        "pytorch/pytorch#151001",
        "example-dtype-assumed",
        lambda: dict(
            model=Bf16InputToFloat().eval(),
            args=(torch.randn(2, 3).to(torch.bfloat16),),
            check_inputs=[(torch.randn(2, 3),)],  # the float32 call of the report
        ),
    ),
    "user-class-mul-strict": Unseen(
        "pytorch/pytorch#136757",
        "unclassified",
        lambda: dict(model=WrapperTimesTensor(), args=(torch.tensor([2, 3]),), strict=True),
    ),
    "meta-kernel-wider-output": Unseen(
        "pytorch/pytorch#154537",
        "wrong-fake-kernel",
        _wider_output_case,
    ),
}
