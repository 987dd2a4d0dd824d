"""Minimal reproductions of every catalog entry, written after patterns readers meet on real models.

`REPRODUCTIONS[entry_id]()` returns the keyword arguments of a `diagnose` call whose report must
contain a finding of that kind, sent to that entry's page (`tests/test_doctor_catalog.py`). A new
catalog entry needs a reproduction here. Each one names the real-world pattern it stands for.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torchvision
from torch import nn
from torch.export import Dim


# ------------------------------------------------------------------ values known only at run time
class KeepIfEnough(nn.Module):
    """Post-processing that branches on how many values survive a mask (detector score filters)."""

    def forward(self, x):
        positives = x[x > 0]
        if positives.shape[0] > 2:
            return positives * 2
        return positives


class ScaleIfPositive(nn.Module):
    """A branch on a tensor's value (`if x.sum() > 0`), as in normalization code."""

    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x


class PackedSizes(nn.Module):
    """Deformable-DETR's `spatial_shapes`: feature sizes packed into a tensor, read back as ints."""

    def forward(self, feature):
        spatial_shapes = torch.as_tensor([feature.shape[-2:], feature.shape[-2:]])
        height = int(spatial_shapes[0, 0])
        return torch.linspace(0.5, height - 0.5, height)


class CropsPerDetection(nn.Module):
    """One crop per confident detection, counted with `int()` of a sum of the scores' mask: a value of
    the input read as a Python int (a loop over detections in post-processing)."""

    def forward(self, scores, features):
        count = int((scores > 0.5).sum())
        return torch.stack([features[i] for i in range(count)]).mean(0)


class ScaledByWeights(nn.Module):
    """Two inputs, one with a batch dimension; `dynamic_shapes` will name only the first."""

    def forward(self, x, weights):
        return x * weights


class AugmentsWhileTraining(nn.Module):
    """Training-time noise keyed on `self.training`, left in training mode (no Dropout module)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        if self.training:
            x = x + 0.1 * torch.randn_like(x)
        return self.fc(x)


class ObservedProjection(nn.Module):
    """A layer between eager quantization's `prepare` and `convert`: an observer on its output."""

    def __init__(self):
        super().__init__()
        from torch.ao.quantization.observer import HistogramObserver

        self.proj = nn.Linear(4, 4)
        self.activation_post_process = HistogramObserver()

    def forward(self, x):
        return self.activation_post_process(self.proj(x))


# An export script that defines its output class itself: the class lives in `__main__`.
_EXPORT_SCRIPT = """
from dataclasses import dataclass

import torch


@dataclass
class ScriptDetections:
    boxes: torch.Tensor
    scores: torch.Tensor


torch.export.register_dataclass(ScriptDetections, serialized_type_name="export_script.ScriptDetections")


class ScriptHead(torch.nn.Module):
    def forward(self, x):
        return ScriptDetections(x[:, :4], x[:, 4])
"""


@functools.cache
def defined_in_a_script() -> type:
    """`ScriptHead`, run as a script runs (``__name__ == "__main__"``), once per process (the class's
    registration cannot be repeated)."""
    namespace = {"__name__": "__main__"}
    exec(_EXPORT_SCRIPT, namespace)
    return namespace["ScriptHead"]


# ------------------------------------------------------------------ dynamic dimensions
class HalfByInt(nn.Module):
    """A resize to half the size computed with `int()` (pytorch/pytorch#138853's pattern)."""

    def forward(self, x):
        return nn.functional.interpolate(
            x, size=(int(x.shape[-2] / 2), int(x.shape[-1] / 2)), mode="bilinear"
        )


class Flatten2(nn.Module):
    """A reshape to a fixed leading size (a head written for a batch of 2). With `Dim.AUTO` the batch
    silently becomes static, as in pytorch/pytorch#151094 (a `reshape([batch_size, -1])`)."""

    def forward(self, x):
        return x.reshape(2, -1) * 2


class Classifier(nn.Module):
    """A classifier head; with a batch-1 example and `Dim("batch")` it fails as ResNet-50 does in
    pytorch/pytorch#133653 ("inferred to be a constant (1)")."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 3)

    def forward(self, x):
        return self.linear(x).softmax(-1)


# ------------------------------------------------------------------ pytrees
class Instances:
    """Stands for detectron2's `Instances`: a result class no pytree registration knows."""

    def __init__(self, image_size, pred_boxes, scores):
        self.image_size, self.pred_boxes, self.scores = image_size, pred_boxes, scores


class ReturnsInstances(nn.Module):
    """A detectron2-style model returning `Instances` (outputs export cannot flatten: pytorch/pytorch#140615)."""

    def forward(self, x):
        return Instances((32, 32), x[:, :4], x[:, 4])


class ReturnsCache(nn.Module):
    """A decoder called with `use_cache=True`: it returns a transformers cache beside its output."""

    def forward(self, x):
        from transformers.cache_utils import DynamicCache, EncoderDecoderCache

        return x * 2, EncoderDecoderCache(DynamicCache(), DynamicCache())


class SpaceToDepth(nn.Module):
    """Two-by-two pixel blocks into channels (a YOLO-style stem): only even sizes reshape."""

    def forward(self, x):
        b, c, h, w = x.shape
        blocks = x.reshape(b, c, h // 2, 2, w // 2, 2).permute(0, 1, 3, 5, 2, 4)
        return blocks.reshape(b, c * 4, h // 2, w // 2)


class ModelOutputCache:
    """A class of the model's own whose name ends in "Cache": not a transformers cache."""

    def __init__(self, keys):
        self.keys = keys


class ReturnsOwnCache(nn.Module):
    def forward(self, x):
        return x * 2, ModelOutputCache(x)


@dataclass
class DetectorInput:
    image: torch.Tensor
    score_threshold: float


class TakesDataclass(nn.Module):
    """A predictor that takes its inputs as an unregistered dataclass (pytorch/pytorch#147400)."""

    def forward(self, inputs: DetectorInput):
        return inputs.image * (inputs.image > inputs.score_threshold)


class Pair:
    """A result class registered with `register_pytree_node` but without `flatten_with_keys_fn`."""

    def __init__(self, first, second):
        self.first, self.second = first, second


class ReturnsPair(nn.Module):
    def forward(self, x):
        return Pair(x + 1, x - 1)


class Detections:
    """A result class registered as a pytree node without a `serialized_type_name`."""

    def __init__(self, boxes, scores):
        self.boxes, self.scores = boxes, scores


class ReturnsDetections(nn.Module):
    def forward(self, x):
        return Detections(x[:, :4], x[:, 4])


class TopScores(nn.Module):
    """The best scores and their classes, returned as `topk` gives them (a `torch.return_types.topk`),
    as classification heads and DETR-style post-processing write it."""

    def forward(self, logits):
        return logits.softmax(-1).topk(3)


def _register_once(cls: type, **extra) -> None:
    import torch.utils._pytree as pytree

    if cls not in pytree.SUPPORTED_NODES:
        pytree.register_pytree_node(
            cls, lambda obj: (list(vars(obj).values()), None), lambda children, _: cls(*children), **extra
        )


# ------------------------------------------------------------------ code export rejects
class Predictor:
    """SAM-style: the model is a predictor object whose method does the work."""

    def __init__(self):
        self.model = nn.Linear(4, 2)

    def predict(self, x):
        return self.model(x).sigmoid()


class FloatsToPython(nn.Module):
    """Box decoding that turns float tensors into Python lists (`.tolist()`)."""

    def forward(self, x):
        scale = x.mean(dim=0).tolist()
        return x * scale[0]


class CallerDepth(nn.Module):
    """Logging or registry code that inspects the call stack inside forward."""

    def forward(self, x):
        depth = len(inspect.stack())
        return x * depth


class UsesNumpy(nn.Module):
    """Pre-processing written with NumPy (`x.numpy()`) inside forward."""

    def forward(self, x):
        return torch.from_numpy(x.numpy() * 2)


class MutatesAttribute(nn.Module):
    """A prompt template stored as a plain tensor attribute and edited in place (BLIP-style; export
    passes and run_decompositions raises, as for the captured statistics of pytorch/pytorch#197096)."""

    def __init__(self):
        super().__init__()
        self.prompt = torch.zeros(4)

    def forward(self, x):
        self.prompt[0] = 1.0
        return x + self.prompt


class CachesGridByShape(nn.Module):
    """A position grid kept between calls in a plain attribute, keyed by the input's shape, its default
    declared on the class (as Ultralytics' `Detect` head keeps its anchors): export of a fresh model
    leaves FakeTensors in it."""

    shape = None
    grid = torch.empty(0)

    def forward(self, x):
        if self.shape != x.shape:
            self.grid = torch.arange(x.shape[-1], dtype=x.dtype)
            self.shape = x.shape
        return x + self.grid


class LeastSquares(nn.Module):
    """`torch.linalg.lstsq`, an aten operator whose output size depends on the data, with no kernel
    export can trace."""

    def forward(self, a, b):
        return torch.linalg.lstsq(a, b).solution


def _after_one_call(model: nn.Module, x: torch.Tensor) -> nn.Module:
    """The model after an eager call on ``x``, the reader's check that it runs: its caches filled."""
    with torch.no_grad():
        model(x)
    return model


class CountsCallsThroughData(nn.Module):
    """A call counter kept in a buffer and advanced through `.data`, the way older code updates state
    without autograd seeing it (non-strict export refuses it, strict export drops the write)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        self.calls.data.add_(1)
        return x + self.calls


# ------------------------------------------------------------------ custom operators
@torch.library.custom_op("casebook_tests::area_numpy", mutates_args=())
def area_numpy(boxes: torch.Tensor) -> torch.Tensor:
    """NumPy post-processing made an operator, before its author wrote the fake kernel."""
    b = boxes.numpy()
    return torch.from_numpy((b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]))


class BoxAreas(nn.Module):
    def forward(self, boxes):
        return area_numpy(boxes) * 2


# A kernel registered with the dispatcher the way a C++ extension's TORCH_LIBRARY does, without a
# fake kernel (detectron2's and Deformable DETR's compiled ops before their authors added one).
_LIBRARY = torch.library.Library("casebook_tests", "FRAGMENT")
_LIBRARY.define("pairwise_distance(Tensor a, Tensor b) -> Tensor")
_LIBRARY.impl("pairwise_distance", lambda a, b: torch.cdist(a, b), "CPU")
_LIBRARY.define("pairwise_distance_swapped(Tensor a, Tensor b) -> Tensor")
_LIBRARY.impl("pairwise_distance_swapped", lambda a, b: torch.cdist(a, b), "CPU")


@torch.library.register_fake("casebook_tests::pairwise_distance_swapped", lib=_LIBRARY)
def _swapped_fake(a, b):
    return a.new_empty(b.shape[0], a.shape[0])  # the slip: should be (len(a), len(b))


class NearestDistance(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, a, b):
        return self.op(a, b).min(dim=1).values


def _points() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.rand(5, 2), torch.rand(3, 2)


# ------------------------------------------------------------------ loops
class LoopOf(nn.Module):
    """A three-step `torch.while_loop` around one body, as decoders and iterative solvers write them."""

    def __init__(self, body_fn, cond_fn=None):
        super().__init__()
        self.body_fn = body_fn
        self.cond_fn = cond_fn or (lambda i, *carried: i < 3)

    def forward(self, *carried):
        return torch.while_loop(self.cond_fn, self.body_fn, (torch.tensor(0), *carried))


def _grow(i, tokens):
    """A decoder appending each token to the carried sequence."""
    return i + 1, torch.cat([tokens, tokens[:1]])


def _index_write(i, tokens):
    """A decoder writing step `i` into its (batch, steps) buffer with an index taken from the counter."""
    tokens = tokens.clone()
    tokens[:, i] = tokens[:, 0] + 1
    return i + 1, tokens


# ------------------------------------------------------------------ running the program
@torch.library.custom_op("casebook_tests::positive_rows", mutates_args=())
def positive_rows(x: torch.Tensor) -> torch.Tensor:
    """A custom kernel: the rows whose first value is positive."""
    return x[x[:, 0] > 0].clone()


@positive_rows.register_fake
def _positive_rows_fake(x):
    rows = torch.library.get_ctx().new_dynamic_size(min=1)  # its author assumed at least one row
    return x.new_empty(rows, x.shape[1])


class PositiveRows(nn.Module):
    """A model around that custom kernel."""

    def forward(self, x):
        return positive_rows(x) * 2


class Masks(nn.Module):
    """SAM-style flag: one mask or three."""

    def forward(self, x, multimask_output: bool = True):
        return x[:, :3] if multimask_output else x[:, :1]


class Scaled(nn.Module):
    def forward(self, x, scale):
        return x * scale


# ------------------------------------------------------------------ problems that raise nothing
class ChecksInputs(nn.Module):
    """transformers-style: an input check skipped under `torch.compiler.is_compiling()`."""

    def forward(self, x):
        if not torch.compiler.is_compiling():
            if (x < 0).any():
                raise ValueError("negative pixel values")
        return x.sqrt()


class SqueezeSingle(nn.Module):
    """A detector head that drops the batch dimension for a single image (`if len(images) == 1`)."""

    def forward(self, x):
        y = x * 2
        if x.shape[0] == 1:
            y = y.squeeze(0)
        return y


class TwoStrides(nn.Module):
    """A backbone with two stride-2 stages: a 1-pixel map is ruled out only by `!= 1` guards."""

    def __init__(self):
        super().__init__()
        self.convs = nn.Sequential(
            nn.Conv2d(3, 4, 3, stride=2, padding=1), nn.Conv2d(4, 4, 3, stride=2, padding=1)
        )

    def forward(self, x):
        return self.convs(x)


class CropToStride(nn.Module):
    """Pre-processing that crops the height to a multiple of the backbone's stride."""

    def forward(self, x):
        h = x.shape[2]
        return x[:, :, : h // 32 * 32] * 2


class ScoreHead(nn.Module):
    """Centres its features, then scores them: served one request at a time as often as in batches."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 2)

    def forward(self, x):
        return self.linear((x - 0.5) * 2).softmax(-1)


class RequiresFloat(nn.Module):
    """torchvision's `normalize_image` pattern: a dtype check in Python that export runs only once."""

    def forward(self, x):
        if not x.is_floating_point():
            raise TypeError(f"Input tensor should be a float tensor. Got {x.dtype}.")
        return x - 0.5


class NormalizesItsInput(nn.Module):
    """A model that normalizes its own input (`x.float()`, then mean and std), as wrappers for
    deployment do: exported on float32, it is then fed the uint8 frames a decoder gives."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))

    def forward(self, x):
        return ((x.float() / 255 - self.mean) / self.std).mean((2, 3))


class FlattenAfterPool(nn.Module):
    """A CNN head that flattens with `.contiguous().view(n, -1)` (older torchvision-era models),
    fed channels-last images."""

    def __init__(self):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.fc = nn.Linear(3 * 2 * 2, 4)

    def forward(self, x):
        x = self.pool(x)
        return self.fc(x.contiguous().view(x.shape[0], -1))


class KeepAfterNms(nn.Module):
    """Detection post-processing with torchvision's `nms`, whose stock fake kernel bounds the number
    of kept boxes below by 2 (the `[2, ...]` range in pytorch/pytorch#121036, torchvision's RPN)."""

    def forward(self, boxes, scores):
        keep = torchvision.ops.nms(boxes, scores, 0.5)
        return boxes[keep], scores[keep]


def _boxes() -> tuple[torch.Tensor, torch.Tensor]:
    boxes = torch.tensor([[0.0, 0, 10, 10], [20, 20, 30, 30], [0, 0, 9, 9], [40, 40, 50, 60]])
    return boxes, torch.tensor([0.9, 0.8, 0.7, 0.6])


# ------------------------------------------------------------------ building TensorRT engines
class ScoreFilter(nn.Module):
    """A head that keeps the confident anchors with `torch.nonzero`, which TensorRT for RTX refuses."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.box_head = nn.Conv2d(8, 4, 1)
        self.score_head = nn.Conv2d(8, 1, 1)

    def forward(self, image):
        features = self.features(image)
        boxes = self.box_head(features).flatten(2).transpose(1, 2).reshape(-1, 4)
        scores = torch.sigmoid(self.score_head(features)).reshape(-1)
        keep = torch.nonzero(scores > 0.5).squeeze(1)
        return boxes[keep], scores[keep]


class SplitOffTheFirstTwo(nn.Module):
    """`split` with a size that follows the dynamic batch (one piece per image in detectors)."""

    def forward(self, x):
        y = (x * 2.0 + 1.0).relu()
        first, rest = y.split([2, x.shape[0] - 2])
        return (first.sum(0) * 3.0).sigmoid(), (rest.sum(0) - 1.0).tanh()


class ScaleByHalfTheBatch(nn.Module):
    """`torch.full` filled with a size computed from the dynamic batch."""

    def forward(self, x):
        half = torch.full((), x.shape[0] // 2, dtype=torch.float32)
        return ((x * 2.0 + 1.0).relu() * half - 1.0).sigmoid()


class TopScoresOfAFlatList(nn.Module):
    """The best scores over every position and class, from one flattened list (DETR's post-processing)."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 3, padding=1))

    def forward(self, x):
        scores, index = self.features(x).sigmoid().flatten().topk(10)
        return scores, index % 4


class NormalizedInTheModel(nn.Module):
    """Preprocessing shipped inside the model: torchvision's `Normalize` turns its mean and std (Python
    lists) into tensors in `forward`, which export keeps as constants on the traced device."""

    def __init__(self):
        super().__init__()
        from torchvision.transforms import v2

        self.normalize = v2.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
        self.head = nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten())

    def forward(self, images):
        return self.head(self.normalize(images))


class RowPositions(nn.Module):
    """DETR's sine position embedding: each row's index over the last row's, read with `rows[:, -1:, :]`."""

    def forward(self, x):
        rows = torch.ones_like(x[:, 0]).cumsum(1)
        return (rows / (rows[:, -1:, :] + 1e-6) * 6.28).sin() * x[:, 0]


class LearnedQueriesAttend(nn.Module):
    """Learned queries (a parameter, as in DETR's decoder) attend to image features, with no `scale`."""

    def __init__(self):
        super().__init__()
        self.queries = nn.Parameter(torch.randn(1, 4, 10, 8))
        self.features = nn.Conv2d(3, 32, 3, padding=1)

    def forward(self, x):
        features = self.features(x).flatten(2).transpose(1, 2)  # (batch, positions, 32)
        heads = features.reshape(features.shape[0], features.shape[1], 4, 8).transpose(1, 2)
        queries = self.queries.expand(features.shape[0], -1, -1, -1)
        return torch.nn.functional.scaled_dot_product_attention(queries, heads, heads)


class DecodeKeptBoxes(nn.Module):
    """Layers on the boxes NMS kept: the engine after NMS reads a count with no upper bound."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(4, 10)

    def forward(self, boxes, scores):
        keep = torchvision.ops.nms(boxes, scores, 0.5)
        return (self.head(boxes[keep]).sigmoid() * 2.0 - 1.0).relu()


class PoolEachClassOfTheKept(nn.Module):
    """For each box NMS kept, one region per class (90 n rows, pooled in PyTorch by `roi_align`), then
    reshaped by the kept count n: the engine after `roi_align` takes n bare and as 90 n, and the opt
    sizes Torch-TensorRT makes up for the two disagree."""

    def forward(self, boxes, scores, feature):
        keep = torchvision.ops.nms(boxes, scores, 0.5)
        kept = boxes[keep]
        per_class = kept.repeat(1, 90).reshape(-1, 4)
        rois = torch.cat([torch.zeros_like(per_class[:, :1]), per_class], 1)
        pooled = torchvision.ops.roi_align(feature, rois, 1)
        x = pooled.reshape(kept.shape[0], 90, pooled.shape[1]) * kept.sum(1)[:, None, None]
        return ((x.relu() * 2.0 + 1.0).sigmoid() - 0.5).abs()


class ScaleXCoordinates(nn.Module):
    """detectron2's `Boxes.scale`: an in-place write to every other column, a slice with a step and no end."""

    def forward(self, boxes):
        boxes = boxes * 2.0 + 1.0
        boxes[:, 0::2] *= 0.5
        return (boxes.relu() - 0.5).abs()


class KeptIndicesAsFloat(nn.Module):
    """The indices NMS kept, returned as floats beside a sum over them: the cast reads the block's input
    and is its output, where the converter that takes dynamic shapes does not apply."""

    def forward(self, boxes, scores):
        keep = torchvision.ops.nms(boxes, scores, 0.5)
        return keep.float(), ((keep * 2 + 1) * keep - 3).sum()


def _batch_of_six() -> dict:
    return {"args": (torch.randn(6, 8),), "dynamic_shapes": ({0: Dim("batch", min=4, max=16)},)}


class DecodeBetweenBounds(nn.Module):
    """DecodeKeptBoxes with the kept count bounded on both sides (`600 <= n <= 1000`), as a reader who
    knows their scenes states it: Torch-TensorRT's made-up opt, min + max / 2, lands above max."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(4, 10)

    def forward(self, boxes, scores):
        keep = torchvision.ops.nms(boxes, scores, 0.5)
        torch._check(keep.shape[0] >= 600)
        torch._check(keep.shape[0] <= 1000)
        return (self.head(boxes[keep]).sigmoid() * 2.0 - 1.0).relu()


class ClipNormalizer(nn.Module):
    """Frames normalized against the clip's mean, exported with `Dim(min=2)` on purpose (a clip of one
    frame means nothing): Torch-TensorRT's rule for PyTorch's 0/1 specialization lowers it to 1."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, frames):
        centered = (frames - frames.mean(0)) * 2.0
        return self.proj(centered).relu() + 1.0


class TopFiveThousand(nn.Module):
    """Keeps the 5000 best of 20 000 anchors before NMS (a `pre_nms_top_n` of 5000, as detectron2's
    RPN uses in training configs): above the 3840 Torch-TensorRT's `topk` converter takes."""

    def forward(self, logits, boxes):
        top, index = logits.sigmoid().topk(5000, dim=1)
        picked = torch.gather(boxes, 1, index.unsqueeze(-1).expand(-1, -1, 4))
        return (top * 2.0).relu(), (picked + 1.0).relu() * 3.0


class InterleavedCache(nn.Module):
    """Writes new keys into every other slot of a `[batch, heads, positions, head_dim]` cache (two
    streams interleaved): Torch-TensorRT 2.14's KV-cache layer ignores the step."""

    def forward(self, cache, new):
        cache = torch.slice_scatter(cache, new, dim=2, start=0, end=8, step=2)
        return (cache * 2.0 + 1.0).relu() * 0.5, cache


def _fifty_boxes() -> tuple[torch.Tensor, torch.Tensor]:
    corners = torch.rand(50, 2, generator=torch.Generator().manual_seed(0)) * 100
    return torch.cat([corners, corners + 10], dim=1), torch.rand(
        50, generator=torch.Generator().manual_seed(1)
    )


def _apart_boxes(count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`count` unit boxes on a grid, none overlapping: NMS keeps every one."""
    index = torch.arange(count, dtype=torch.float32)
    corners = torch.stack([index % 40, index // 40], dim=1) * 3.0
    return torch.cat([corners, corners + 1.0], dim=1), torch.rand(
        count, generator=torch.Generator().manual_seed(2)
    )


class EncodingCachedBySize(nn.Module):
    """A sine position encoding cached by the feature map's sizes, tested with `in` as SAM 2's
    ``PositionEmbeddingSine`` does (``if cache_key in self.cache``)."""

    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        cache_key = (x.shape[-2], x.shape[-1])
        if cache_key not in self.cache:
            rows = torch.arange(x.shape[-2], dtype=x.dtype)[:, None]
            cols = torch.arange(x.shape[-1], dtype=x.dtype)[None, :]
            self.cache[cache_key] = torch.sin(rows / 10) + torch.cos(cols / 10)
        return x + self.cache[cache_key]


# ------------------------------------------------------------------ outside the catalog
class ReadsDataPointer(nn.Module):
    """A custom-kernel wrapper that checks alignment through `data_ptr()`, which fake tensors refuse
    since pytorch/pytorch#122514; the book has no page on it, so the doctor must not guess one."""

    def forward(self, x):
        if x.data_ptr() % 16:
            x = x.clone()
        return x * 2


def _rows(n: int = 3) -> torch.Tensor:
    return torch.arange(n * 5, dtype=torch.float32).reshape(n, 5) / 10


REPRODUCTIONS: dict[str, Callable[[], dict]] = {
    "data-dependent-guard": lambda: {"model": KeepIfEnough(), "args": (torch.tensor([1.0, -2.0, 3.0, 4.0]),)},
    "data-dependent-branch-strict": lambda: {
        "model": ScaleIfPositive(),
        "args": (torch.ones(3),),
        "strict": True,
    },
    "data-dependent-int": lambda: {"model": PackedSizes(), "args": (torch.rand(1, 4, 6, 8),)},
    "data-dependent-value-int": lambda: {
        "model": CropsPerDetection(),
        "args": (torch.tensor([0.9, 0.1, 0.8]), torch.rand(3, 4)),
    },
    "load-needs-registration": lambda: {"model": defined_in_a_script()(), "args": (torch.rand(3, 5),)},
    "quantization-observer": lambda: {"model": ObservedProjection(), "args": (torch.rand(2, 4),)},
    "size-pinned-by-int": lambda: {
        "model": HalfByInt(),
        "args": (torch.rand(1, 3, 32, 48),),
        "dynamic_shapes": ({2: Dim.AUTO, 3: Dim.AUTO},),
    },
    "training-mode-baked": lambda: {"model": AugmentsWhileTraining(), "args": (torch.rand(3, 4),)},
    "dynamic-shapes-spec-mismatch": lambda: {
        "model": ScaledByWeights(),
        "args": (torch.rand(2, 4), torch.rand(4)),
        "dynamic_shapes": {"x": {0: Dim("batch")}},
    },
    "size-one-specialized": lambda: {
        "model": Classifier(),
        "args": (torch.rand(1, 8),),
        "dynamic_shapes": ({0: Dim("batch")},),
    },
    "constraints-violated": lambda: {
        "model": Flatten2(),
        "args": (torch.rand(2, 8),),
        "dynamic_shapes": ({0: Dim("batch")},),
    },
    "needs-a-multiple": lambda: {
        "model": SpaceToDepth(),
        "args": (torch.rand(1, 3, 8, 8),),
        "dynamic_shapes": ({2: Dim("h", min=2, max=64), 3: Dim("w", min=2, max=64)},),
    },
    "cache-output": lambda: {"model": ReturnsCache(), "args": (torch.rand(2, 3),)},
    "unflattenable-output": lambda: {"model": ReturnsInstances(), "args": (_rows(),)},
    "unflattenable-output-strict": lambda: {"model": ReturnsInstances(), "args": (_rows(),), "strict": True},
    "unsupported-input-type": lambda: {
        "model": TakesDataclass(),
        "args": (DetectorInput(torch.rand(3), 0.5),),
    },
    "unsupported-input-type-strict": lambda: {
        "model": TakesDataclass(),
        "args": (DetectorInput(torch.rand(3), 0.5),),
        "strict": True,
    },
    "missing-flatten-with-keys": lambda: (
        _register_once(Pair),
        {"model": ReturnsPair(), "args": (torch.rand(3),)},
    )[1],
    "pytree-serialization-name": lambda: (
        _register_once(Detections, flatten_with_keys_fn=_detections_with_keys),
        {"model": ReturnsDetections(), "args": (_rows(),)},
    )[1],
    "structseq-output": lambda: {"model": TopScores(), "args": (torch.rand(2, 10),)},
    "non-module-callable": lambda: {"model": Predictor().predict, "args": (torch.rand(2, 4),)},
    "size-keyed-cache": lambda: {
        "model": EncodingCachedBySize(),
        "args": (torch.rand(1, 4, 6, 10),),
        "dynamic_shapes": ({2: Dim("h", min=2, max=64), 3: Dim("w", min=2, max=64)},),
    },
    "tolist-float": lambda: {"model": FloatsToPython(), "args": (torch.rand(3, 2),), "strict": True},
    "skipped-function": lambda: {"model": CallerDepth(), "args": (torch.rand(3),), "strict": True},
    "numpy-in-forward": lambda: {"model": UsesNumpy(), "args": (torch.rand(3),)},
    "constant-mutated": lambda: {"model": MutatesAttribute(), "args": (torch.rand(4),)},
    "fake-tensors-left-in-model": lambda: {"model": CachesGridByShape(), "args": (torch.rand(2, 5),)},
    "shape-cache-pins-dims": lambda: {
        "model": _after_one_call(CachesGridByShape(), torch.rand(2, 5)),
        "args": (torch.rand(2, 5),),
        "dynamic_shapes": ({1: Dim("length")},),
    },
    "data-write-dropped": lambda: {
        "model": CountsCallsThroughData(),
        "args": (torch.ones(3),),
        "strict": True,
    },
    "fake-constant": lambda: {"model": CountsCallsThroughData(), "args": (torch.ones(3),)},
    "custom-op-without-fake": lambda: {"model": BoxAreas(), "args": (_boxes()[0],)},
    "aten-op-without-kernel": lambda: {
        "model": LeastSquares(),
        "args": (torch.rand(6, 3), torch.rand(6, 1)),
    },
    "operator-without-fake": lambda: {
        "model": NearestDistance(torch.ops.casebook_tests.pairwise_distance),
        "args": _points(),
    },
    "loop-carried-metadata": lambda: {"model": LoopOf(_grow), "args": (torch.rand(4),)},
    "loop-aliasing": lambda: {"model": LoopOf(lambda i, x: (i + 1, x)), "args": (torch.rand(4),)},
    "loop-input-mutation": lambda: {
        "model": LoopOf(lambda i, x: (i + 1, x.add_(1).clone())),
        "args": (torch.rand(4),),
    },
    "loop-condition-not-scalar": lambda: {
        "model": LoopOf(lambda i, x: (i + 1, x - 1), cond_fn=lambda i, x: x > 0),
        "args": (torch.rand(4),),
    },
    "loop-counter-index": lambda: {"model": LoopOf(_index_write), "args": (torch.rand(2, 4),)},
    "wrong-fake-kernel": lambda: {
        "model": NearestDistance(torch.ops.casebook_tests.pairwise_distance_swapped),
        "args": _points(),
    },
    "runtime-assert-failed": lambda: {
        "model": PositiveRows(),
        "args": (_rows() - 0.5,),
        "check_inputs": [(-_rows() - 1,)],
    },
    "static-dim-guard": lambda: {
        "model": Classifier().eval(),
        "args": (torch.rand(2, 8),),
        "check_inputs": [(torch.rand(4, 8),)],
    },
    "baked-argument-guard": lambda: {
        "model": Masks(),
        "args": (torch.rand(2, 4),),
        "kwargs": {"multimask_output": False},
        "check_inputs": [{"args": (torch.rand(2, 4),), "kwargs": {"multimask_output": True}}],
    },
    "kwarg-mismatch": lambda: {
        "model": Scaled(),
        "args": (),
        "kwargs": {"x": torch.rand(3), "scale": torch.tensor(2.0)},
        "check_inputs": [(torch.rand(3), torch.tensor(2.0))],
    },
    "dynamic-dim-specialized": lambda: {
        "model": Flatten2(),
        "args": (torch.rand(2, 8),),
        "dynamic_shapes": ({0: Dim.AUTO, 1: Dim.AUTO},),
    },
    "dropped-input-check": lambda: {"model": ChecksInputs(), "args": (torch.rand(3),)},
    "parity-mismatch": lambda: {"model": CallerDepth(), "args": (torch.rand(3),)},
    "size-one-branch": lambda: {
        "model": SqueezeSingle(),
        "args": (torch.rand(2, 3),),
        "dynamic_shapes": ({0: Dim("batch", min=1, max=8)},),
    },
    "not-one-guard": lambda: {
        "model": TwoStrides(),
        "args": (torch.rand(1, 3, 32, 32),),
        "dynamic_shapes": ({2: Dim("h", min=1, max=64)},),
    },
    "derived-dim-guard": lambda: {
        "model": CropToStride(),
        "args": (torch.rand(1, 3, 64, 8),),
        "dynamic_shapes": ({2: 32 * Dim("h32", min=2, max=16)},),
        "check_inputs": [(torch.rand(1, 3, 100, 8),)],
    },
    "exported-program-input-checks": lambda: {"model": RequiresFloat(), "args": (torch.rand(2, 3),)},
    "example-dtype-assumed": lambda: {
        "model": NormalizesItsInput(),
        "args": (torch.rand(2, 3, 8, 8) * 255,),
        "check_inputs": [(torch.randint(0, 256, (2, 3, 8, 8), dtype=torch.uint8),)],  # the decoder's frames
    },
    "example-layout-assumed": lambda: {
        "model": FlattenAfterPool().eval(),
        "args": (torch.rand(2, 3, 8, 8),),
        "check_inputs": [(torch.rand(2, 3, 8, 8).contiguous(memory_format=torch.channels_last),)],
    },
    "restrictive-runtime-assert": lambda: {"model": KeepAfterNms(), "args": _boxes()},
    "device-baked": lambda: {
        "model": NormalizedInTheModel().eval(),
        "args": (torch.rand(2, 3, 16, 16),),
        "device": "cuda",
    },
    "aoti-unchecked-inputs": lambda: {"model": ScoreHead().eval(), "args": (torch.rand(2, 4),), "aoti": True},
    "aoti-size-one-refused": lambda: {
        "model": ScoreHead().eval(),
        "args": (torch.rand(2, 4),),
        "dynamic_shapes": ({0: Dim("batch", min=1, max=8)},),
        "aoti": True,
    },
    "tensorrt-unsupported-ops": lambda: {"model": KeepAfterNms(), "args": _boxes(), "tensorrt": True},
    "tensorrt-rtx-nonzero": lambda: {
        "model": ScoreFilter().eval(),
        "args": (torch.randn(1, 3, 16, 16),),
        "tensorrt": True,
    },
    "tensorrt-symbolic-split": lambda: {"model": SplitOffTheFirstTwo(), **_batch_of_six(), "tensorrt": True},
    "tensorrt-symbolic-fill": lambda: {"model": ScaleByHalfTheBatch(), **_batch_of_six(), "tensorrt": True},
    "tensorrt-1d-topk": lambda: {
        "model": TopScoresOfAFlatList().eval(),
        "args": (torch.rand(1, 3, 32, 32),),
        "tensorrt": True,
    },
    "tensorrt-negative-start-slice": lambda: {
        "model": RowPositions(),
        "args": (torch.rand(1, 3, 32, 48),),
        "dynamic_shapes": ({2: Dim("h", min=8, max=256), 3: Dim("w", min=8, max=256)},),
        "tensorrt": True,
    },
    "tensorrt-constant-query-attention": lambda: {
        "model": LearnedQueriesAttend().eval(),
        "args": (torch.rand(1, 3, 8, 8),),
        "tensorrt": True,
    },
    "tensorrt-opt-clash": lambda: {
        "model": PoolEachClassOfTheKept(),
        "args": (*_fifty_boxes(), torch.rand(1, 8, 32, 32, generator=torch.Generator().manual_seed(2))),
        "tensorrt": True,
    },
    "tensorrt-strided-slice-write": lambda: {
        "model": ScaleXCoordinates(),
        "args": (torch.rand(8, 4, generator=torch.Generator().manual_seed(0)),),
        "tensorrt": True,
    },
    "tensorrt-copy-at-block-edge": lambda: {
        "model": KeptIndicesAsFloat(),
        "args": _fifty_boxes(),
        "tensorrt": True,
    },
    "tensorrt-made-up-profile": lambda: {
        "model": DecodeKeptBoxes(),
        "args": _fifty_boxes(),
        "tensorrt": True,
    },
    "tensorrt-opt-above-max": lambda: {
        "model": DecodeBetweenBounds(),
        "args": _apart_boxes(800),
        "dynamic_shapes": ({0: Dim("boxes", min=1, max=2000)}, {0: Dim("boxes", min=1, max=2000)}),
        "tensorrt": True,
    },
    "tensorrt-min-two-lowered": lambda: {
        "model": ClipNormalizer(),
        "args": (torch.randn(8, 16),),
        "dynamic_shapes": ({0: Dim("frames", min=2, max=64)},),
        "tensorrt": True,
    },
    "tensorrt-topk-over-3840": lambda: {
        "model": TopFiveThousand(),
        "args": (torch.randn(1, 20_000), torch.randn(1, 20_000, 4)),
        "tensorrt": True,
    },
    "tensorrt-kv-cache-strided-write": lambda: {
        "model": InterleavedCache(),
        "args": (torch.zeros(1, 2, 16, 4), torch.ones(1, 2, 4, 4)),
        "tensorrt": True,
    },
}


def _detections_with_keys(obj):
    from torch.utils._pytree import GetAttrKey

    return [(GetAttrKey("boxes"), obj.boxes), (GetAttrKey("scores"), obj.scores)], None


UNCLASSIFIED = lambda: {"model": ReadsDataPointer(), "args": (torch.rand(4),)}  # noqa: E731
CLEAN = lambda: {  # noqa: E731
    "model": Classifier().eval(),
    "args": (torch.rand(4, 8),),
    "dynamic_shapes": ({0: Dim("batch", min=1, max=64)},),
    "check_inputs": [(torch.rand(1, 8),), (torch.rand(9, 8),)],
}
