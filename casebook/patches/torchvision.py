"""Export-safe versions of a few torchvision 0.29.1 detection functions, applied temporarily.

``torchvision.models.detection.fasterrcnn_mobilenet_v3_large_fpn`` does not go through
``torch.export.export`` on torchvision 0.29.1 (pytorch/pytorch#146152). The open torchvision pull
request pytorch/vision#9395 fixes it in the library; until a release contains it, this module
carries the same changes, re-derived from the 0.29.1 source, as small replacement functions.

Each change is one named patch (see :data:`PATCHES`, listed in the order export hits the failures)
and is applied only inside :func:`export_patches`, which restores torchvision's originals on exit,
also when the block raises. Nothing in site-packages is edited.

Every patch keeps eager behaviour identical: a data-dependent test such as ``boxes.numel() > 4000``
becomes ``guard_or_false(boxes.numel() > 4000)``, which on concrete sizes (eager) is exactly the
original test and under export, where the size is an unbacked symbol, picks the branch that is
correct for every size instead of asking for a guard. The one exception is
``skip_resize_in_eval``, which changes what the model does on purpose (it stops resizing inputs,
so image height and width can stay symbolic) and only for models that opt in with
``model.transform._skip_resize = True``. ``ssd_candidates_in_one_topk`` fixes no error: SSD
exports without it, more slowly and with 90 ``topk`` operators TensorRT cannot take; it gives the
same detections except where scores are exactly equal (see :mod:`.torchvision_ssd`).

Usage::

    with export_patches():                      # all of them
        ep = torch.export.export(model, ([image],), strict=False)

    with export_patches("batched_nms_dispatch"):  # one at a time, as a notebook walks the errors
        ...
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
import torchvision
from torch import Tensor
from torch.fx.experimental.symbolic_shapes import guard_or_false, guard_or_true
from torchvision.models.detection import _utils as det_utils
from torchvision.models.detection import faster_rcnn, mask_rcnn, roi_heads, ssd
from torchvision.models.detection import transform as det_transform
from torchvision.ops import boxes as box_ops
from torchvision.ops import poolers

from . import torchvision_heads, torchvision_ssd
from .core import Patch, Undo, apply, replace, undo_all
from .core import patch_table as _patch_table

# --------------------------------------------------------------------------------------------------
# Replacement functions. Each mirrors the torchvision 0.29.1 original line by line except for the
# lines marked "export-safe".
# --------------------------------------------------------------------------------------------------


def batched_nms(boxes: Tensor, scores: Tensor, idxs: Tensor, iou_threshold: float) -> Tensor:
    """``torchvision.ops.boxes.batched_nms`` without a data-dependent dispatch.

    Fixes: ``Could not guard on data-dependent expression 4*u1 > 4000`` (torchvision/ops/boxes.py,
    ``if boxes.numel() > 4000``). The boxes reaching NMS were filtered by score with
    ``torch.where``, so their number is an unbacked symbol ``u1`` and Python's ``if`` cannot be
    decided while tracing.

    Eager: ``guard_or_false`` on a concrete bool returns it unchanged, so the original choice between
    the per-class loop (many boxes) and the coordinate trick (few boxes) is kept. Under export the
    size is unknown and the coordinate trick is traced: it is correct for any number of boxes. With
    distinct scores the two strategies return the same boxes in the same order. Boxes with exactly
    equal scores come back in another order (``nms`` leaves it unspecified), and that is not
    harmless: the detector then cuts the list to ``detections_per_img``, and when the cut falls
    inside a group of equal scores, eager (which took the loop) and the exported program keep
    different members of the group. The test ``test_equal_scores_at_the_cut_keep_different_boxes``
    shows it; ``casebook.detection_parity.exact_differences`` accepts such differences only at the last
    kept score.
    """
    threshold = 4000 if boxes.device.type == "cpu" else 100_000
    if guard_or_false(boxes.numel() > threshold) and not torchvision._is_tracing():  # export-safe
        return box_ops._batched_nms_vanilla(boxes, scores, idxs, iou_threshold)
    return box_ops._batched_nms_coordinate_trick(boxes, scores, idxs, iou_threshold)


def batched_nms_coordinate_trick(boxes: Tensor, scores: Tensor, idxs: Tensor, iou_threshold: float) -> Tensor:
    """``torchvision.ops.boxes._batched_nms_coordinate_trick`` without the data-dependent empty check.

    Fixes: ``Could not guard on data-dependent expression Eq(4*u1, 0)`` (torchvision/ops/boxes.py,
    ``if boxes.numel() == 0``).

    Eager: ``guard_or_false`` returns the concrete answer, so an empty input still returns early.
    Under export the early return is not traced, so the traced code must itself be correct for
    zero boxes: ``boxes.max()`` raises on an empty tensor, hence the maximum is taken over the
    boxes plus one ``-inf`` element. For a non-empty input that is exactly ``boxes.max()``; for an
    empty one the offsets are empty and ``nms`` returns an empty int64 tensor.
    """
    if guard_or_false(boxes.numel() == 0):  # export-safe
        return torch.empty((0,), dtype=torch.int64, device=boxes.device)
    minus_inf = boxes.new_full((1,), float("-inf"))
    max_coordinate = torch.cat([boxes.reshape(-1), minus_inf]).max()  # export-safe: empty-safe max
    offsets = idxs.to(boxes) * (max_coordinate + torch.tensor(1).to(boxes))
    boxes_for_nms = boxes + offsets[:, None]
    return box_ops.nms(boxes_for_nms, scores, iou_threshold)


def box_coder_decode(self: det_utils.BoxCoder, rel_codes: Tensor, boxes: list[Tensor]) -> Tensor:
    """``BoxCoder.decode`` without the ``box_sum > 0`` guard and without ``-1`` in the reshapes.

    Fixes: ``Could not guard on data-dependent expression Min(1000, u2) > 0``
    (models/detection/_utils.py, ``if box_sum > 0``): ``box_sum`` is the number of proposals the
    RPN kept, ``min(post_nms_top_n, u2)`` with ``u2`` the unbacked output size of NMS. The error
    appears only once ``nms_fake_allows_empty`` is applied: with torchvision's own fake kernel
    ``u2 >= 2`` and the test is statically true.

    The guard exists because ``reshape(0, -1)`` is ambiguous. ``guard_or_true`` keeps the concrete
    test in eager (zero boxes still skip the reshapes) and assumes "non-empty" under export, where the
    reshapes then get explicit sizes, which are also valid for zero rows (``-1`` would export too,
    but the program would raise on an image whose RPN kept no proposal).
    ``rel_codes.numel() // box_sum`` is what ``-1`` infers (the symbolic division simplifies to
    the constant column count); ``decode_single`` returns ``box_sum`` rows, so its ``-1`` is
    ``columns // 4``.
    """
    torch._assert(isinstance(boxes, (list, tuple)), "This function expects boxes of type list or tuple.")
    torch._assert(
        isinstance(rel_codes, torch.Tensor), "This function expects rel_codes of type torch.Tensor."
    )
    boxes_per_image = [b.size(0) for b in boxes]
    concat_boxes = torch.cat(boxes, dim=0)
    box_sum = 0
    for val in boxes_per_image:
        box_sum += val
    if guard_or_true(box_sum > 0):  # export-safe
        rel_codes = rel_codes.reshape(box_sum, rel_codes.numel() // box_sum)
    pred_boxes = self.decode_single(rel_codes, concat_boxes)
    if guard_or_true(box_sum > 0):  # export-safe
        pred_boxes = pred_boxes.reshape(box_sum, pred_boxes.shape[-1] // 4, 4)
    return pred_boxes


def multiscale_roi_align(
    x_filtered: list[Tensor],
    boxes: list[Tensor],
    output_size: list[int],
    sampling_ratio: int,
    scales: list[float] | None,
    mapper: poolers.LevelMapper | None,
) -> Tensor:
    """``torchvision.ops.poolers._multiscale_roi_align`` with ``rois.shape[0]`` for ``len(rois)``.

    Fixes: ``Could not extract specialized integer from data-dependent expression Min(1000, u2)``
    (ops/poolers.py, ``num_rois = len(rois)``). ``len()`` must return a Python ``int``, so it
    forces the unbacked number of proposals to a concrete value; ``rois.shape[0]`` is the same
    number kept as a symbolic int. Eager: identical (both are the same int).
    """
    if scales is None or mapper is None:
        raise ValueError("scales and mapper should not be None")
    num_levels = len(x_filtered)
    rois = poolers._convert_to_roi_format(boxes)
    if num_levels == 1:
        return poolers.roi_align(
            x_filtered[0],
            rois,
            output_size=output_size,
            spatial_scale=scales[0],
            sampling_ratio=sampling_ratio,
        )
    levels = mapper(boxes)
    num_rois = rois.shape[0]  # export-safe: was len(rois)
    num_channels = x_filtered[0].shape[1]
    dtype, device = x_filtered[0].dtype, x_filtered[0].device
    result = torch.zeros((num_rois, num_channels) + output_size, dtype=dtype, device=device)
    tracing_results = []
    for level, (per_level_feature, scale) in enumerate(zip(x_filtered, scales, strict=False)):
        idx_in_level = torch.where(levels == level)[0]
        rois_per_level = rois[idx_in_level]
        result_idx_in_level = poolers.roi_align(
            per_level_feature,
            rois_per_level,
            output_size=output_size,
            spatial_scale=scale,
            sampling_ratio=sampling_ratio,
        )
        if torchvision._is_tracing():
            tracing_results.append(result_idx_in_level.to(dtype))
        else:
            result[idx_in_level] = result_idx_in_level.to(result.dtype)
    if torchvision._is_tracing():
        result = poolers._onnx_merge_levels(levels, tracing_results)
    return result


def nms_fake(dets: Tensor, scores: Tensor, iou_threshold: float) -> Tensor:
    """Fake (shape-only) kernel of ``torchvision::nms`` that allows an empty result.

    Fixes, at *run time* of an exported program: ``Runtime assertion failed for expression
    u7 >= 2``. torchvision registers the fake kernel with ``ctx.create_unbacked_symint()``,
    whose default lower bound is 2 (so that compilers do not specialize on sizes 0 and 1); export
    records that bound as a runtime assertion, and an image where NMS keeps fewer than two boxes
    then fails. ``ctx.new_dynamic_size(min=0)`` states the truth: NMS may keep nothing.

    Eager: fake kernels only run while tracing; the real CPU/CUDA kernels are untouched. The override
    must also be active wherever the program is traced again (AOTInductor compilation, for one).
    """
    torch._check(dets.dim() == 2, lambda: f"boxes should be a 2d tensor, got {dets.dim()}D")
    torch._check(
        dets.size(1) == 4, lambda: f"boxes should have 4 elements in dimension 1, got {dets.size(1)}"
    )
    torch._check(scores.dim() == 1, lambda: f"scores should be a 1d tensor, got {scores.dim()}")
    torch._check(
        dets.size(0) == scores.size(0),
        lambda: (
            f"boxes and scores should have same number of elements in dimension 0, got {dets.size(0)} and "
            f"{scores.size(0)}"
        ),
    )
    ctx = torch.library.get_ctx()
    num_to_keep = ctx.new_dynamic_size(min=0)  # export-safe: was create_unbacked_symint() (min=2)
    return dets.new_empty(num_to_keep, dtype=torch.long)


def batch_images(
    self: det_transform.GeneralizedRCNNTransform, images: list[Tensor], size_divisible: int = 32
) -> Tensor:
    """``GeneralizedRCNNTransform.batch_images`` with integer rounding and ``F.pad``.

    Fixes, for symbolic height/width: the original rounds up with
    ``int(math.ceil(float(h) / stride) * stride)``. On torch 2.14.1, non-strict export turns the
    ``int()`` of that symbolic float into a guard that specializes ``h`` to the example's value
    (``Constraints violated ... specialized it to be a constant``); strict export keeps ``math.ceil``
    as a graph node, which ``torch.export.save`` cannot serialize (``SerializeError: Failed
    serializing node ceil``). ``(h + stride - 1) // stride * stride`` is the same integer (for an
    integer ``size_divisible``, as in every torchvision model) and stays in integer arithmetic. The
    padded batch is built with ``F.pad`` and ``torch.stack`` instead of copying into slices of a
    ``new_full`` buffer (same zeros, same values), and the per-axis maximum over the batch uses
    ``torch.sym_max`` rather than Python's ``max`` (which would guard on which image is larger).
    """
    if torchvision._is_tracing():
        return self._onnx_batch_images(images, size_divisible)
    max_size = list(images[0].shape)
    for img in images[1:]:
        max_size = [
            torch.sym_max(m, s) for m, s in zip(max_size, img.shape, strict=True)
        ]  # export-safe: no Python max()
    stride = int(size_divisible)
    max_size[1] = (max_size[1] + stride - 1) // stride * stride  # export-safe: integer ceil
    max_size[2] = (max_size[2] + stride - 1) // stride * stride
    padded = [
        F.pad(
            img, (0, max_size[2] - img.shape[2], 0, max_size[1] - img.shape[1], 0, max_size[0] - img.shape[0])
        )
        for img in images
    ]
    return torch.stack(padded)


_original_resize = det_transform.GeneralizedRCNNTransform.resize


def resize(
    self: det_transform.GeneralizedRCNNTransform, image: Tensor, target: dict[str, Tensor] | None = None
) -> tuple[Tensor, dict[str, Tensor] | None]:
    """``GeneralizedRCNNTransform.resize`` that honours ``_skip_resize`` in eval mode too.

    Fixes, for dynamic height/width: in eval mode the transform rescales every image so that its
    short side is ``min_size`` (800) unless the long side would exceed ``max_size``. The output size
    is ``trunc(h * 800 / min(h, w))``, a float expression; the rest of the model then specializes it
    to the example's 800 x 800, and export records that as guards on the input, so the "dynamic"
    program rejects every image that does not resize to exactly 800 x 800 (``Guard failed:
    math.trunc(800 / ...) == 800``). torchvision already has a private switch, ``_skip_resize``
    (a constructor keyword), but 0.29.1 honours it only in training mode. With this patch a model
    whose ``transform._skip_resize`` is True passes images through at their own size (resize them
    before the model, as a serving pipeline does anyway); boxes then come back in the input's
    coordinates. Models without the switch are unchanged. Outside :func:`export_patches` such a
    model resizes again, so compute eager references for it inside the context too.
    """
    if not self.training and self._skip_resize:
        return image, target
    return _original_resize(self, image, target)


# --------------------------------------------------------------------------------------------------
# The patches, in the order torch.export hits the failures on fasterrcnn_mobilenet_v3_large_fpn.
# --------------------------------------------------------------------------------------------------


def install_nms_fake() -> Undo:
    """Register :func:`nms_fake` for ``torchvision::nms``; the returned undo restores torchvision's own."""
    library = torch.library.Library("torchvision", "FRAGMENT")
    torch.library.register_fake("torchvision::nms", nms_fake, lib=library)
    return library._destroy


PATCHES: dict[str, Patch] = {
    patch.name: patch
    for patch in [
        Patch(
            "batched_nms_dispatch",
            "torchvision.ops.boxes.batched_nms",
            "Could not guard on data-dependent expression 4*u1 > 4000",
            batched_nms,
            lambda: undo_all(
                replace(box_ops, "batched_nms", batched_nms),
                replace(torchvision.ops, "batched_nms", batched_nms),
            ),
        ),
        Patch(
            "coordinate_trick_empty_check",
            "torchvision.ops.boxes._batched_nms_coordinate_trick",
            "Could not guard on data-dependent expression Eq(4*u1, 0)",
            batched_nms_coordinate_trick,
            lambda: replace(box_ops, "_batched_nms_coordinate_trick", batched_nms_coordinate_trick),
        ),
        Patch(
            "roi_align_num_rois",
            "torchvision.ops.poolers._multiscale_roi_align",
            "Could not extract specialized integer from data-dependent expression Min(1000, u2)",
            multiscale_roi_align,
            lambda: replace(poolers, "_multiscale_roi_align", multiscale_roi_align),
        ),
        Patch(
            "nms_fake_allows_empty",
            "the torchvision::nms fake kernel (torchvision/_meta_registrations.py)",
            "(at run time) Runtime assertion failed for expression u7 >= 2",
            nms_fake,
            install_nms_fake,
        ),
        Patch(
            "box_coder_decode",
            "torchvision.models.detection._utils.BoxCoder.decode",
            "Could not guard on data-dependent expression Min(1000, u2) > 0",
            box_coder_decode,
            lambda: replace(det_utils.BoxCoder, "decode", box_coder_decode),
        ),
        Patch(
            "skip_resize_in_eval",
            "torchvision.models.detection.transform.GeneralizedRCNNTransform.resize",
            "(dynamic H/W) the resized size is fixed by guards: Guard failed: math.trunc(800 / ...) == 800",
            resize,
            lambda: replace(det_transform.GeneralizedRCNNTransform, "resize", resize),
        ),
        Patch(
            "batch_images_integer_padding",
            "torchvision.models.detection.transform.GeneralizedRCNNTransform.batch_images",
            "(dynamic H/W) Constraints violated: specialized it to be a constant (transform.py, math.ceil)",
            batch_images,
            lambda: replace(det_transform.GeneralizedRCNNTransform, "batch_images", batch_images),
        ),
        Patch(
            "roi_head_batch_norm",
            "FastRCNNConvFCHead.forward and MaskRCNNHeads.forward (the v2 heads, with BatchNorm)",
            "Could not guard on data-dependent expression Eq(12544*Min(1000, u2), 0)",
            torchvision_heads.roi_head_forward,
            lambda: undo_all(
                replace(faster_rcnn.FastRCNNConvFCHead, "forward", torchvision_heads.roi_head_forward),
                replace(mask_rcnn.MaskRCNNHeads, "forward", torchvision_heads.roi_head_forward),
            ),
        ),
        Patch(
            "paste_masks_without_loop",
            "torchvision.models.detection.roi_heads.paste_masks_in_image (Mask R-CNN)",
            "Could not guard on data-dependent expression Eq(Min(100, u9), 0)",
            torchvision_heads.paste_masks_in_image,
            lambda: undo_all(
                replace(roi_heads, "paste_masks_in_image", torchvision_heads.paste_masks_in_image),
                # transform.py imported the function by name: replace that reference too
                replace(det_transform, "paste_masks_in_image", torchvision_heads.paste_masks_in_image),
            ),
        ),
        Patch(
            "heatmaps_to_keypoints_without_loop",
            "torchvision.models.detection.roi_heads.heatmaps_to_keypoints (Keypoint R-CNN), and "
            "RoIHeads.forward to pass it the image size",
            "Could not extract specialized integer from data-dependent expression Min(100, u9)",
            torchvision_heads.heatmaps_to_keypoints,
            lambda: undo_all(
                replace(roi_heads, "heatmaps_to_keypoints", torchvision_heads.heatmaps_to_keypoints),
                # the decoder's canvas is bounded by the image size, which only RoIHeads.forward knows
                replace(
                    roi_heads.RoIHeads,
                    "forward",
                    torchvision_heads.roi_heads_forward_knowing_image_size(roi_heads.RoIHeads.forward),
                ),
            ),
        ),
        Patch(
            "ssd_candidates_in_one_topk",
            "torchvision.models.detection.ssd.SSD.postprocess_detections (SSD300, SSDlite)",
            "(no error) one `topk` per class, 90 with a data-dependent k: slow exports, 90 operators "
            "TensorRT leaves to PyTorch",
            torchvision_ssd.postprocess_detections,
            lambda: replace(ssd.SSD, "postprocess_detections", torchvision_ssd.postprocess_detections),
        ),
    ]
}
"""Every patch, by name: Faster R-CNN's in the order export meets the failures, then the two RoI-head
loops, then SSD's loop over classes."""

STATIC_EXPORT_PATCHES = (
    "batched_nms_dispatch",
    "coordinate_trick_empty_check",
    "roi_align_num_rois",
    "nms_fake_allows_empty",
    "box_coder_decode",
    "roi_head_batch_norm",
    "paste_masks_without_loop",
    "heatmaps_to_keypoints_without_loop",
)
"""The patches a static-shape export needs (the last three only for other detectors than Faster R-CNN v1)."""


@contextmanager
def export_patches(*names: str) -> Iterator[tuple[str, ...]]:
    """Apply the named patches (all of :data:`PATCHES` if none are named) inside the block.

    The originals are restored on exit, also when the block raises. Yields the applied names.
    """
    with apply(PATCHES, *names) as applied:
        yield applied


def patch_table() -> str:
    """The patches as a Markdown table (name, what it replaces, the error it fixes)."""
    return _patch_table(PATCHES)
