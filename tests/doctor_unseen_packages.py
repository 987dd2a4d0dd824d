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
"""

from __future__ import annotations

import torch
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
}
