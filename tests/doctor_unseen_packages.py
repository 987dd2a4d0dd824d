"""Unseen cases met on the real packages of issue 52 (Ultralytics YOLO11, 2026-11-29), each reduced to
the few lines that matter and cited to a public report. Written, with the doctor's verdicts, before
any code that handles them.

Both come from one pattern, a cache that ``forward`` writes on the module, keyed by a shape
(Ultralytics' ``Detect._get_decode_boxes``: ``if self.dynamic or self.shape != shape: self.anchors,
self.strides = ...; self.shape = shape``). The catalog had no entry for either; until it has, the
right answer is "not in the book's catalog" (``unclassified``), and a case moves to the entry the day
one is written (`fake-anchors-left-in-model` did: `fake-tensors-left-in-model`, with the doctor's
check of the model's attributes before and after export; `shape-cache-pins-dims` did: the entry of the
same name, with the doctor's export of a copy whose cached shapes are forgotten).

Two more from RF-DETR (``rfdetr==1.11.2``, case_studies/rfdetr_nano, 2026-12-03), written with the
doctor's verdicts before any code handles them: its position encoding's cache keyed by
``tuple(mask.shape)``, and its backbone's position embedding resized to ``int()`` of a derived size.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.export import Dim
from unseen_case import Unseen


class AnchorCacheHead(nn.Module):
    """A detection head that keeps its anchor grid between calls, keyed by the feature map's shape,
    in plain attributes (not buffers) whose defaults are declared on the class, as Ultralytics'
    ``Detect`` head does. (Torch 2.14.1 puts back the tensor attributes an instance had before export;
    these the instance gets only in its first `forward`.)"""

    shape = None
    anchors = torch.empty(0)

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=2, padding=1)

    def forward(self, x):
        y = self.conv(x)
        if self.shape != y.shape:
            h, w = y.shape[-2:]
            gy, gx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
            self.anchors = torch.stack((gx, gy)).float() + 0.5
            self.shape = y.shape
        return y[:, :2] * 2 + self.anchors


def _head_after_an_eager_call(x: torch.Tensor) -> AnchorCacheHead:
    head = AnchorCacheHead().eval()
    with torch.no_grad():
        head(x)  # the reader's check that eager runs on the example: it fills the cache
    return head


def _cache_pins_dims() -> dict:
    x = torch.rand(2, 3, 32, 48)
    return dict(
        model=_head_after_an_eager_call(x),
        args=(x,),
        dynamic_shapes=({0: Dim("batch"), 2: 2 * Dim("h", min=4, max=64), 3: 2 * Dim("w", min=4, max=64)},),
    )


class SizeKeyedGridCache(nn.Module):
    """A coordinate grid cached in a dict keyed by the input's height and width, as RF-DETR's
    ``PositionEmbeddingSine`` keys its cache by ``tuple(mask.shape)``."""

    def __init__(self):
        super().__init__()
        self._grids = {}

    def forward(self, x):
        key = tuple(x.shape[-2:])
        grid = self._grids.get(key)
        if grid is None:
            rows, cols = key
            grid = torch.stack(torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")).float()
            self._grids[key] = grid
        return x + grid.sum(0)


class PositionGridResizedByInt(nn.Module):
    """Learned position embeddings resized to the input's patch grid, with the grid's size passed
    through ``int()`` (Transformers' ``torch_int`` outside ``torch.jit`` tracing), as RF-DETR's DINOv2
    backbone does."""

    def __init__(self):
        super().__init__()
        self.pos = nn.Parameter(torch.rand(1, 4, 6, 6))

    def forward(self, x):
        grid = (int(x.shape[-2] // 16), int(x.shape[-1] // 16))
        return x[:, :, ::16, ::16] + F.interpolate(self.pos, size=grid, mode="bicubic")


PACKAGES: dict[str, Unseen] = {
    # pytorch/pytorch#155114 ("After torch.export.export, my model inference results in FakeTensor"),
    # met on Ultralytics YOLO11 (case_studies/ultralytics_yolo11): export of a fresh model writes its
    # FakeTensors into the module's attributes; the next eager call at that shape returns FakeTensors.
    # 2.14.1: export warns ("were assigned during export") and passes; the program equals eager.
    "fake-anchors-left-in-model": Unseen(
        "pytorch/pytorch#155114",
        "fake-tensors-left-in-model",
        lambda: dict(model=AnchorCacheHead().eval(), args=(torch.rand(1, 3, 32, 48),)),
    ),
    # ultralytics/ultralytics#20370 (Ultralytics' ONNX export with dynamo=True) stopped at "Constraints
    # violated (batch)"; met on YOLO11 with torch.export: after an eager call on the example, the cached
    # shape equals the traced one and each equal element becomes a guard, so every dimension is
    # pinned to the example (batch = 2 here).
    "shape-cache-pins-dims": Unseen(
        "ultralytics/ultralytics#20370",
        # was "unclassified" (a wrong page, constraints-violated 'confirmed' by making the batch static)
        # until the entry and the doctor's export of a copy with the cached shape forgotten
        "shape-cache-pins-dims",
        _cache_pins_dims,
    ),
    # pytorch/pytorch#185190 (2026-05: "symbolic SymInts keep raising TypeError"; hashing them is
    # refused on purpose), met on RF-DETR's position encoding (rfdetr/models/position_encoding.py:117):
    # a cache keyed by sizes fails a dynamic export with "unhashable type: non-nested SymInt".
    "size-keyed-cache-unhashable": Unseen(
        "pytorch/pytorch#185190",
        # was "unclassified" (right while the catalog had no entry for it)
        "size-keyed-cache",
        lambda: dict(
            model=SizeKeyedGridCache().eval(),
            args=(torch.rand(1, 3, 8, 12),),
            dynamic_shapes=({2: Dim("h", min=2, max=64), 3: Dim("w", min=2, max=64)},),
        ),
    ),
    # pytorch/pytorch#138853 ("Using int(shape) in export would result in silent specialization") with
    # derived dimensions (pytorch/pytorch#181097: their guards surface only at run time), met on
    # RF-DETR's backbone: export returns a program whose range says 32..640 and which refuses every
    # size but the example's (Guard failed: x.size()[2] // 16 == 6).
    "int-of-derived-size": Unseen(
        "pytorch/pytorch#138853",
        "size-pinned-by-int",
        lambda: dict(
            model=PositionGridResizedByInt().eval(),
            args=(torch.rand(1, 4, 96, 128),),
            dynamic_shapes=({2: 16 * Dim("h16", min=2, max=40), 3: 16 * Dim("w16", min=2, max=40)},),
        ),
        # was missed: "wrong page: names static-dim-guard (message only) for int() of a derived size,
        # whose guard has no math.trunc to match size-pinned-by-int"
    ),
}
