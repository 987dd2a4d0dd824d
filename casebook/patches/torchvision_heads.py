"""Loop-free versions of the two per-detection loops in torchvision 0.29.1's RoI heads.

Mask R-CNN pastes each detection's 28 x 28 mask into the image one detection at a time
(``roi_heads.paste_masks_in_image``), and Keypoint R-CNN decodes each detection's heatmaps one at a
time (``roi_heads.heatmaps_to_keypoints``). Both loops run ``len(boxes)`` times and resize to a size
read from a box with ``int(...)``: under ``torch.export`` the number of detections is an unbacked
symbol and the box is data, so neither loop can be traced. No guard rewrite helps; the loop itself
has to go.

The replacements do the same arithmetic for every detection at once. Each resize is written as what
``F.interpolate`` computes for one output pixel (source position, neighbours, weights, the same
formulas as ATen's CPU kernels), with each detection's output size as a tensor instead of a Python
int, over a canvas as large as the largest detection. Pixels of the canvas that lie outside a
detection's own output are masked, so the result does not depend on the other detections. The
keypoint canvas is bounded by the image size, which ``RoIHeads.forward`` records for the decoder
(:func:`roi_heads_forward_knowing_image_size`): exported, its sizes then have an upper bound.
:mod:`casebook.patches.torchvision` registers them as patches; ``tests/test_patches_torchvision_heads.py``
compares them with torchvision's loops, including zero detections and boxes that leave the image.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.fx.experimental.symbolic_shapes import guard_or_false
from torchvision.models.detection import roi_heads


class _ImageSize:
    """(height, width) of the largest image in the batch while ``RoIHeads.forward`` runs (see
    :func:`roi_heads_forward_knowing_image_size`); None outside it. A plain attribute, not a
    ``ContextVar``: TorchDynamo (strict export) traces attribute writes and refuses ``ContextVar.set``."""

    current: tuple[int | torch.SymInt, int | torch.SymInt] | None = None


_IMAGE_SIZE = _ImageSize()

CUBIC_A = -0.75
"""The bicubic kernel's constant in ATen (``get_cubic_upsample_coefficients``)."""


def _source_positions(out_sizes: Tensor, pixels: Tensor, in_size: int) -> Tensor:
    """Where output pixel ``pixels[n, i]`` of detection ``n``'s resize samples its input (ATen's formula).

    ``F.interpolate(..., align_corners=False)`` with an output ``size`` (no scale factor) uses
    ``scale = in_size / out_size`` and samples output pixel ``i`` at ``scale * (i + 0.5) - 0.5``.
    """
    out_sizes = out_sizes.to(torch.float32)
    # A true division: `in_size / tensor` would be computed as in_size * reciprocal(tensor).
    scale = torch.full_like(out_sizes, in_size) / out_sizes  # (N,)
    return scale[:, None] * (pixels.to(torch.float32) + 0.5) - 0.5


def linear_resize_weights(out_sizes: Tensor, pixels: Tensor, in_size: int) -> Tensor:
    """(N, L, in_size): row ``i`` of detection ``n`` holds output pixel ``pixels[n, i]`` of a bilinear resize.

    Same as ATen's ``upsample_bilinear2d`` along one axis: the source position is clamped at 0, its
    integer part picks the left neighbour, the right neighbour is the next one (the last pixel at
    the edge), and the fractional part splits the weight between them.
    """
    source = _source_positions(out_sizes, pixels, in_size).clamp(min=0)
    left = source.to(torch.int64).clamp(max=in_size - 1)  # trunc == floor: source >= 0
    right = (left + 1).clamp(max=in_size - 1)
    fraction = source - left.to(torch.float32)
    columns = torch.arange(in_size, device=out_sizes.device)
    left_weight = (left[..., None] == columns) * (1 - fraction)[..., None]
    return left_weight + (right[..., None] == columns) * fraction[..., None]


def paste_masks_in_image(
    masks: Tensor, boxes: Tensor, img_shape: tuple[int, int], padding: int = 1
) -> Tensor:
    """``roi_heads.paste_masks_in_image`` as two batched matrix products instead of a loop over detections.

    The loop resizes each (padded) mask to its box's size, ``h = max(y2 - y1 + 1, 1)`` rows, and
    copies the part inside the image to rows ``max(y1, 0)`` to ``min(y2 + 1, H)`` of a zero image
    (columns likewise). A bilinear resize is separable: it is ``R_y @ mask @ R_x.T`` with one weight
    matrix per axis. Here each image row ``y`` of detection ``n`` gets the weights of output row
    ``y - y1`` of that detection's resize, and zero weights outside the pasted rows, so one
    ``(N, H, S) @ (N, S, S) @ (N, S, W)`` product pastes every mask at once. Zero detections give a
    ``(0, 1, H, W)`` result, as the loop does.

    Not bit-identical: the loop's kernel adds four weighted neighbours in its own order, the matrix
    product sums the same four (and zeros) in another; probabilities differ by float rounding only.
    """
    masks, scale = roi_heads.expand_masks(masks, padding=padding)
    boxes = roi_heads.expand_boxes(boxes, scale).to(dtype=torch.int64)
    im_h, im_w = img_shape
    size = masks.shape[-1]
    rows = _paste_weights(boxes[:, 1], boxes[:, 3], im_h, size)  # export-safe: no loop, no int(box)
    cols = _paste_weights(boxes[:, 0], boxes[:, 2], im_w, size)
    pasted = rows.to(masks.dtype) @ masks[:, 0] @ cols.to(masks.dtype).transpose(1, 2)
    return pasted[:, None]


def _paste_weights(start: Tensor, end: Tensor, length: int | torch.SymInt, size: int) -> Tensor:
    """(N, length, size): image pixel ``p`` of detection ``n`` is output pixel ``p - start`` of its resize.

    Pixels outside ``[max(start, 0), min(end + 1, length))``, the part the loop copies, get zero weights.
    """
    extent = (end - start + 1).clamp(min=1)  # the loop's max(int(box[2] - box[0] + 1), 1)
    pixel = torch.arange(length, device=start.device)[None, :]
    inside = (pixel >= start[:, None]) & (pixel <= end[:, None])
    weights = linear_resize_weights(extent, pixel - start[:, None], size)
    return weights * inside[..., None]


def cubic_coefficients(t: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """ATen's four bicubic weights for fractional position ``t`` (``get_cubic_upsample_coefficients``)."""
    a = CUBIC_A

    def near(x):  # cubic_convolution1: |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # cubic_convolution2: 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return far(t + 1.0), near(t), near(1.0 - t), far(1.0 - t + 1.0)


def _cubic_taps(
    out_sizes: Tensor, canvas: int | torch.SymInt, in_size: int
) -> tuple[list[Tensor], list[Tensor]]:
    """For output pixels ``0 .. canvas - 1``: the four source indices and weights of a bicubic resize."""
    pixels = torch.arange(canvas, device=out_sizes.device)[None, :]
    source = _source_positions(out_sizes, pixels, in_size)  # not clamped at 0: cubic
    base = source.floor().to(torch.int64).clamp(max=in_size - 1)
    t = (source - base.to(torch.float32)).clamp(0, 1)
    indices = [(base - 1 + j).clamp(0, in_size - 1) for j in range(4)]
    return indices, list(cubic_coefficients(t))


def heatmaps_to_keypoints(
    maps: Tensor, rois: Tensor, image_size: tuple[int, int] | None = None
) -> tuple[Tensor, Tensor]:
    """``roi_heads.heatmaps_to_keypoints`` for every detection at once.

    The loop resizes detection ``i``'s ``K`` heatmaps (56 x 56) bicubically to its box's size,
    ``ceil(height) x ceil(width)``, takes each keypoint's first maximum and converts its pixel to
    image coordinates. Here every detection's resize is evaluated on one canvas as large as the
    largest box, the pixels beyond a detection's own size are set to ``-inf``, and ``argmax`` over
    the flattened canvas is taken per keypoint. The canvas is row-major like the loop's map and
    ``argmax`` returns the first maximum, so ties resolve to the same pixel.

    The resize uses ATen's formulas (source position, clamped neighbours, the four coefficients,
    columns first and then rows) but not its kernel's rounding: values differ from the loop's in the
    last bits (about 1e-6 relative; ``torch._decomp``'s own bicubic differs from the kernel as much).
    The chosen pixel is the loop's unless two pixels of a heatmap are that close to each other.

    ``image_size`` (height, width), by default the one :func:`roi_heads_forward_knowing_image_size`
    records, bounds the canvas: the boxes were clipped to the image, so no box is larger. Under
    export the canvas's sizes are then at most the image's, not unbounded; a compiler that builds
    example tensors from the bounds (Torch-TensorRT) would otherwise allocate one of gigabytes.
    """
    offset_x, offset_y = rois[:, 0], rois[:, 1]
    widths = (rois[:, 2] - rois[:, 0]).clamp(min=1)
    heights = (rois[:, 3] - rois[:, 1]).clamp(min=1)
    widths_ceil, heights_ceil = widths.ceil(), heights.ceil()
    num_rois, num_keypoints, map_h, map_w = maps.shape

    # The canvas: the largest box (1 x 1 when there is none). Its size is data, so it is read once.
    one = torch.ones(1, dtype=torch.int64, device=widths_ceil.device)
    # export-safe: one integer read (an unbacked size under export) instead of one per detection
    canvas_w = torch.cat([widths_ceil.to(torch.int64), one]).max().item()
    canvas_h = torch.cat([heights_ceil.to(torch.int64), one]).max().item()
    torch._check(canvas_w >= 1)
    torch._check(canvas_h >= 1)
    image_size = image_size if image_size is not None else _IMAGE_SIZE.current
    if image_size is not None:
        # export-safe: gives the unbacked canvas sizes an upper bound (true: boxes are clipped)
        # guard_or_false: in eager a plain comparison; under export False (no guard) where unknown
        if guard_or_false(canvas_h > image_size[0]) or guard_or_false(canvas_w > image_size[1]):
            raise ValueError(  # a readable error in eager: strict export refuses a message closure
                f"a box is {canvas_h} x {canvas_w} pixels (height x width, rounded up), larger than "
                f"the image, {image_size[0]} x {image_size[1]}: heatmaps_to_keypoints expects boxes "
                "clipped to their image, as torchvision's postprocess_detections leaves them. Clip "
                "them with torchvision.ops.clip_boxes_to_image, or pass the image_size they belong to"
            )
        torch._check(canvas_h <= image_size[0])
        torch._check(canvas_w <= image_size[1])

    # Columns first, as the kernel does: for every source row, the resized row (N, K, map_h, canvas_w).
    col_index, col_weight = _cubic_taps(widths_ceil.to(torch.int64), canvas_w, map_w)
    rows = None
    for index, weight in zip(col_index, col_weight, strict=True):
        picked = torch.gather(
            maps, 3, index[:, None, None, :].expand(num_rois, num_keypoints, map_h, canvas_w)
        )
        term = picked * weight[:, None, None, :]
        rows = term if rows is None else rows + term
    # Then rows: (N, K, canvas_h, canvas_w).
    row_index, row_weight = _cubic_taps(heights_ceil.to(torch.int64), canvas_h, map_h)
    roi_map = None
    for index, weight in zip(row_index, row_weight, strict=True):
        picked = torch.gather(
            rows, 2, index[:, None, :, None].expand(num_rois, num_keypoints, canvas_h, canvas_w)
        )
        term = picked * weight[:, None, :, None]
        roi_map = term if roi_map is None else roi_map + term

    # Pixels beyond a detection's own ceil(h) x ceil(w) are not part of its map.
    inside_w = torch.arange(canvas_w, device=maps.device)[None, :] < widths_ceil[:, None]
    inside_h = torch.arange(canvas_h, device=maps.device)[None, :] < heights_ceil[:, None]
    inside = inside_h[:, :, None] & inside_w[:, None, :]  # (N, canvas_h, canvas_w)
    roi_map = roi_map.masked_fill(~inside[:, None], float("-inf"))

    flat = roi_map.reshape(num_rois, num_keypoints, canvas_h * canvas_w)
    best = flat.argmax(dim=2)  # first maximum, as in the loop
    end_scores = torch.gather(flat, 2, best[..., None])[..., 0]
    # The loop's map is ceil(w) wide; the canvas is canvas_w wide: convert the flat index with it.
    x_int = best % canvas_w
    y_int = torch.div(best - x_int, canvas_w, rounding_mode="floor")
    width_correction = widths / widths_ceil
    height_correction = heights / heights_ceil
    x = (x_int.float() + 0.5) * width_correction[:, None]
    y = (y_int.float() + 0.5) * height_correction[:, None]
    xy_preds = torch.stack([x + offset_x[:, None], y + offset_y[:, None], torch.ones_like(x)], dim=2)
    return xy_preds, end_scores


def roi_heads_forward_knowing_image_size(forward: Callable) -> Callable:
    """``RoIHeads.forward`` that tells :func:`heatmaps_to_keypoints` the size of the images.

    torchvision calls ``heatmaps_to_keypoints(maps, rois)`` with the boxes only, which
    ``postprocess_detections`` clipped to their image. ``RoIHeads.forward`` knows the image sizes
    (``image_shapes``): it records the largest height and width for the duration of the call.
    """

    @functools.wraps(forward)
    def forward_knowing_image_size(self, features, proposals, image_shapes, targets=None):
        largest = (
            (
                functools.reduce(torch.sym_max, [height for height, _ in image_shapes]),
                functools.reduce(torch.sym_max, [width for _, width in image_shapes]),
            )
            if image_shapes
            else None  # no image: nothing to bound, and torchvision's own error comes first
        )
        outer, _IMAGE_SIZE.current = _IMAGE_SIZE.current, largest
        try:
            return forward(self, features, proposals, image_shapes, targets)
        finally:
            _IMAGE_SIZE.current = outer

    return forward_knowing_image_size


def roi_head_forward(self: nn.Sequential, x: Tensor) -> Tensor:
    """``nn.Sequential.forward`` for the v2 RoI heads, whose BatchNorm layers see one row per RoI.

    Fixes: ``Could not guard on data-dependent expression Eq(12544*Min(1000, u2), 0)``
    (``FastRCNNConvFCHead`` of ``fasterrcnn_resnet50_fpn_v2`` and ``maskrcnn_resnet50_fpn_v2``, and
    ``MaskRCNNHeads`` of the latter). ``torch.batch_norm`` first asks whether its input is empty, and
    the number of RoIs is an unbacked symbol. In eval mode BatchNorm is
    ``aten._native_batch_norm_legit_no_training``, the operator ``torch.batch_norm`` itself runs for
    a non-empty input and the one an exported program holds after ``run_decompositions``; calling it
    directly skips only the emptiness question, which it does not need (it handles zero rows).
    Eager: the same kernel, bit-identical output. In training mode the layers run unchanged.
    """
    for module in self:
        x = _module_forward(module, x)
    return x


def _module_forward(module: nn.Module, x: Tensor) -> Tensor:
    if isinstance(module, nn.Sequential):  # Conv2dNormActivation: conv, norm, activation
        return roi_head_forward(module, x)
    if (
        isinstance(module, nn.modules.batchnorm._BatchNorm)
        and not module.training
        and module.running_mean is not None
    ):
        module._check_input_dim(x)
        return torch.ops.aten._native_batch_norm_legit_no_training(  # export-safe: no emptiness check
            x, module.weight, module.bias, module.running_mean, module.running_var, 0.0, module.eps
        )[0]
    return module(x)
