"""Two custom operators of the kind detectors carry, for the custom-operators page.

* ``casebook::nms_numpy``: greedy non-maximum suppression written in NumPy (the algorithm of
  py-faster-rcnn's ``py_cpu_nms``), wrapped with `torch.library.custom_op`. How many boxes it keeps
  depends on the data.
* ``casebook_ext::box_iou``: the IoU matrix of two box sets, a C++ kernel registered with
  ``TORCH_LIBRARY`` and compiled at first use with `torch.utils.cpp_extension.load_inline` (about 25 s
  with g++ on two cores; later imports reuse the build in ``~/.cache/torch_extensions``).

Importing this module defines both operators *without* fake (meta) kernels, which is the state that
makes `torch.export` fail. `register_fake_kernels` (or one operator's `register_*_fake`) adds them; a deployment that only runs a saved
program needs the operators (import this module) but not their fake kernels.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch.utils import cpp_extension

BOX_IOU_LIBRARY = "casebook_ext"

BOX_IOU_CPP = r"""
#include <ATen/ATen.h>
#include <torch/library.h>

// IoU of every box in `a` (N, 4) with every box in `b` (M, 4), boxes as (x1, y1, x2, y2): (N, M).
at::Tensor box_iou(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.dim() == 2 && a.size(1) == 4 && b.dim() == 2 && b.size(1) == 4,
              "box_iou expects boxes of shape (N, 4) and (M, 4)");
  auto area_a = (a.select(1, 2) - a.select(1, 0)) * (a.select(1, 3) - a.select(1, 1));
  auto area_b = (b.select(1, 2) - b.select(1, 0)) * (b.select(1, 3) - b.select(1, 1));
  auto top_left = at::max(a.slice(1, 0, 2).unsqueeze(1), b.slice(1, 0, 2).unsqueeze(0));
  auto bottom_right = at::min(a.slice(1, 2, 4).unsqueeze(1), b.slice(1, 2, 4).unsqueeze(0));
  auto size = (bottom_right - top_left).clamp_min(0);
  auto inter = size.select(2, 0) * size.select(2, 1);
  return inter / (area_a.unsqueeze(1) + area_b.unsqueeze(0) - inter);
}

TORCH_LIBRARY(casebook_ext, m) {
  m.def("box_iou(Tensor a, Tensor b) -> Tensor");
}

// The kernel is written with ATen calls, so the same function serves CPU and CUDA tensors.
TORCH_LIBRARY_IMPL(casebook_ext, CPU, m) {
  m.impl("box_iou", &box_iou);
}
TORCH_LIBRARY_IMPL(casebook_ext, CUDA, m) {
  m.impl("box_iou", &box_iou);
}
"""


def build_box_iou_library(verbose: bool = False) -> Path:
    """Compile (or reuse) the ``casebook_ext`` library, load it into this process, return its path."""
    # With is_python_module=False, load_inline loads the library with torch.ops.load_library and
    # returns the path of the .so it loaded.
    return Path(
        cpp_extension.load_inline(
            BOX_IOU_LIBRARY, cpp_sources=BOX_IOU_CPP, is_python_module=False, verbose=verbose
        )
    )


def py_cpu_nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float) -> np.ndarray:
    """Greedy NMS in NumPy: indices of the kept boxes, highest score first (py-faster-rcnn's loop)."""
    x1, y1, x2, y2 = boxes.T
    areas = (x2 - x1) * (y2 - y1)
    order = scores.argsort(kind="stable")[::-1]
    keep = []
    while order.size > 0:
        best, rest = order[0], order[1:]
        keep.append(best)
        width = np.maximum(0.0, np.minimum(x2[best], x2[rest]) - np.maximum(x1[best], x1[rest]))
        height = np.maximum(0.0, np.minimum(y2[best], y2[rest]) - np.maximum(y1[best], y1[rest]))
        inter = width * height
        iou = inter / (areas[best] + areas[rest] - inter)
        order = rest[iou <= iou_threshold]
    return np.asarray(keep, dtype=np.int64)


@torch.library.custom_op("casebook::nms_numpy", mutates_args=())
def nms_numpy(boxes: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """`py_cpu_nms` as an operator: export records one call instead of tracing into NumPy."""
    keep = py_cpu_nms(boxes.detach().cpu().numpy(), scores.detach().cpu().numpy(), iou_threshold)
    return torch.from_numpy(keep).to(boxes.device)


def register_nms_fake() -> None:
    """The fake kernel of ``casebook::nms_numpy``: what `torch.export` needs to trace a call to it."""

    @torch.library.register_fake("casebook::nms_numpy")
    def _(boxes, scores, iou_threshold):
        torch._check(boxes.shape[0] == scores.shape[0], lambda: "nms_numpy: one score per box")
        # How many boxes survive depends on the data: a new size symbol, at most len(boxes). (The
        # bound goes in a check: new_dynamic_size(max=...) takes only a constant.)
        kept = torch.library.get_ctx().new_dynamic_size()
        torch._check(kept <= boxes.shape[0])
        return boxes.new_empty(kept, dtype=torch.int64)


def register_box_iou_fake() -> None:
    """The fake kernel of the C++ ``casebook_ext::box_iou``, registered from Python."""

    @torch.library.register_fake("casebook_ext::box_iou")
    def _(a, b):
        torch._check(a.shape[1] == 4 and b.shape[1] == 4, lambda: "box_iou expects (N, 4) and (M, 4)")
        return a.new_empty(a.shape[0], b.shape[0])


def register_box_iou_plugin() -> None:
    """Make ``casebook_ext::box_iou`` a TensorRT plugin: Torch-TensorRT generates the plugin and its
    converter from the fake kernel (register it first). Call it in the process that compiles, with
    enterprise TensorRT: Torch-TensorRT turns these plugins off under TensorRT for RTX."""
    from torch_tensorrt.dynamo.conversion.plugins import custom_op

    custom_op("casebook_ext::box_iou", supports_dynamic_shapes=True)


def register_fake_kernels() -> None:
    """Both fake kernels, for a process that compiles a program using the operators."""
    register_nms_fake()
    register_box_iou_fake()


BOX_IOU_LIBRARY_PATH = build_box_iou_library()
