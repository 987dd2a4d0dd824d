"""Export-safe versions of a few detectron2 functions, applied temporarily.

detectron2's R-CNN models (Mask R-CNN, ViTDet) do not go through ``torch.export.export`` as shipped:
their inference code branches in Python on data-dependent values (``if not valid_mask.all()``),
turns symbolic sizes into Python ints (``len()``, ``torch.as_tensor`` of sizes) and builds its
image padding from tensors. The failures come one at a time, in this order, on
``mask_rcnn_R_50_FPN_3x`` exported (non-strict) through ``detectron2.export.TracingAdapter``:

=====  ================================  =========================================================
 #     patch                             what export says without it
=====  ================================  =========================================================
 0     ``image_list_int_padding``        (no error: the padded image size becomes unbacked ``u0``,
                                         ``u1``, and every later shape an expression in them)
 1     ``rpn_filters_without_branches``  ``Could not guard on data-dependent expression Eq(u0, 1)``
 2     ``boxes_init_empty_check``        ``... Eq(4*u0, 0)``
 3     ``boxes_clip_finite_check``       ``... Eq(u1, 1)`` (``assert torch.isfinite(...).all()``)
 4     ``batched_nms_dispatch``          ``... 4*u1 > 4000``
 5     ``instances_set_length``          ``Could not extract specialized integer ... Min(1000, u2)``
 6     ``pooler_batch_index``            the same, from ``shapes_to_tensor``
 7     ``fast_rcnn_filters_without_...`` ``... Eq(u7, 1)`` in ``fast_rcnn_inference_single_image``
 8     ``paste_masks_single_chunk``      ``Could not extract specialized integer ... u14``
 9     ``nms_fake_allows_empty``         (export succeeds; the program then fails at run time with
                                         ``Runtime assertion failed for expression u9 >= 2``)
=====  ================================  =========================================================

Each change is one named :class:`Patch` (see :data:`PATCHES`) and is applied only inside
:func:`export_patches`, which restores detectron2's originals on exit, also when the block raises.
Nothing in site-packages is edited.

Every patch keeps eager outputs identical, by one of three means, named in its docstring:

* a Python test on a size becomes ``guard_or_false(...)``/``guard_or_true(...)``: on concrete sizes
  (eager) that is exactly the original test; under export, where the size is an unbacked symbol,
  it picks the branch that is correct for every size;
* a filter that was skipped when it would keep everything (``if not mask.all(): x = x[mask]``) is
  always applied: indexing with an all-true mask returns the same values in the same order;
* a check that must stay (``assert``) keeps its eager form and becomes a runtime check
  (``torch._check``, ``torch._assert_async``) only while ``torch.compiler.is_compiling()``.

Two switches change what the model computes and are therefore NOT eager-preserving:
``skip_nms`` and ``skip_filter_confidence`` (keyword arguments of :func:`export_patches`). They
reproduce a published attempt at taking ViTDet to TensorRT, where NMS and the score threshold were
removed from the graph to shrink the part TensorRT cannot take. Outputs differ from eager by design.

Usage::

    with export_patches(), torch.no_grad():            # every patch
        ep = torch.export.export(adapter, adapter.flattened_inputs, strict=False)

    with export_patches("image_list_int_padding"):      # one at a time, as a notebook walks the errors
        ...
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from detectron2 import layers as d2_layers
from detectron2.layers import cat, mask_ops, move_device_like
from detectron2.modeling import poolers
from detectron2.modeling.proposal_generator import proposal_utils, rpn
from detectron2.modeling.roi_heads import fast_rcnn
from detectron2.structures import Boxes, ImageList, Instances
from torch.fx.experimental.symbolic_shapes import guard_or_false
from torch.utils._pytree import GetAttrKey
from torchvision.ops import boxes as box_ops

from ..pytree_nodes import register_node, unregister_nodes
from . import torchvision as tv_patches
from .core import Patch, apply, check_names, replace, undo_all
from .core import patch_table as _patch_table

__all__ = [
    "PATCHES",
    "Patch",
    "export_patches",
    "patch_table",
    "register_pytree_nodes",
    "unregister_pytree_nodes",
]

d2_nms = importlib.import_module("detectron2.layers.nms")  # the module; `detectron2.layers.nms` is a function

# Output-changing switches, set only by export_patches(skip_nms=..., skip_filter_confidence=...).
_SWITCHES = {"skip_nms": False, "skip_filter_confidence": False}


def _is_symbolic(value: Any) -> bool:
    return isinstance(value, torch.SymInt | torch.SymBool | torch.SymFloat)


# --------------------------------------------------------------------------------------------------
# Replacement functions. Each mirrors the detectron2 original (sal-detectron2 0.7.2, i.e. detectron2
# main of 2024) line by line except for the lines marked "export-safe".
# --------------------------------------------------------------------------------------------------


def image_list_from_tensors(
    tensors: list[torch.Tensor],
    size_divisibility: int = 0,
    pad_value: float = 0.0,
    padding_constraints: dict[str, int] | None = None,
) -> ImageList:
    """``ImageList.from_tensors`` computing the padded size with Python ints.

    Fixes: no error, but a program full of unbacked symbols. The original turns every image size
    into a tensor (``shapes_to_tensor``), takes the maximum and rounds it up to
    ``size_divisibility`` with tensor arithmetic, then passes 0-d tensors to ``F.pad``. Export
    must read those tensors back as ints, so the padded height and width become unbacked symbols
    (``u0``, ``u1``) and every later shape an expression such as ``Min(1000, 3*((u0 + 319)//4 + 1)
    * ...)``: slower tracing, runtime asserts on the input size, and ranges a backend cannot plan.

    Eager: the same maximum and the same rounding in ints, so the same padding and the same batch.
    """
    assert len(tensors) > 0
    assert isinstance(tensors, tuple | list)
    for t in tensors:
        assert isinstance(t, torch.Tensor), type(t)
        assert t.shape[:-2] == tensors[0].shape[:-2], t.shape

    image_sizes = [(im.shape[-2], im.shape[-1]) for im in tensors]
    max_size = [max(s[0] for s in image_sizes), max(s[1] for s in image_sizes)]  # export-safe: ints

    if padding_constraints is not None:
        square_size = padding_constraints.get("square_size", 0)
        if square_size > 0:
            # pad to square.
            max_size = [square_size, square_size]
        if "size_divisibility" in padding_constraints:
            size_divisibility = padding_constraints["size_divisibility"]
    if size_divisibility > 1:
        stride = size_divisibility
        max_size = [(m + (stride - 1)) // stride * stride for m in max_size]  # export-safe: ints

    if len(tensors) == 1:
        image_size = image_sizes[0]
        padding_size = [0, max_size[-1] - image_size[1], 0, max_size[-2] - image_size[0]]
        batched_imgs = F.pad(tensors[0], padding_size, value=pad_value).unsqueeze_(0)
    else:
        batch_shape = [len(tensors)] + list(tensors[0].shape[:-2]) + list(max_size)
        batched_imgs = tensors[0].new_full(batch_shape, pad_value)
        for i, img in enumerate(tensors):
            batched_imgs[i, ..., : img.shape[-2], : img.shape[-1]].copy_(img)

    return ImageList(batched_imgs.contiguous(), image_sizes)


def find_top_rpn_proposals(
    proposals: list[torch.Tensor],
    pred_objectness_logits: list[torch.Tensor],
    image_sizes: list[tuple[int, int]],
    nms_thresh: float,
    pre_nms_topk: int,
    post_nms_topk: int,
    min_box_size: float,
    training: bool,
) -> list[Instances]:
    """``proposal_utils.find_top_rpn_proposals`` without Python branches on the filters' results.

    Fixes: ``Could not guard on data-dependent expression Eq(u0, 1)`` at
    ``if not valid_mask.all():`` (is every proposal finite?) and, right after it, the same kind of
    error at ``if _is_tracing() or keep.sum().item() != len(boxes):`` (did the empty-box filter
    remove anything?). Both ask a question about tensor *values* in a Python ``if``.

    Eager: in inference both filters are now always applied. When every box is finite (or
    non-empty) the mask is all true and indexing with it returns the same boxes in the same order,
    which is what skipping the filter returned. In training a non-finite box still raises
    ``FloatingPointError``, as before.

    With ``export_patches(skip_nms=True)`` the per-level NMS is replaced by a sort on the score
    (outputs change: overlapping proposals are kept).
    """
    num_images = len(image_sizes)
    device = proposals[0].device

    # 1. Select top-k anchor for every level and every image
    topk_scores = []  # #lvl Tensor, each of shape N x topk
    topk_proposals = []
    level_ids = []  # #lvl Tensor, each of shape (topk,)
    batch_idx = move_device_like(torch.arange(num_images, device=device), proposals[0])
    for level_id, (proposals_i, logits_i) in enumerate(zip(proposals, pred_objectness_logits, strict=True)):
        num_proposals_i = min(logits_i.shape[1], pre_nms_topk)
        topk_scores_i, topk_idx = logits_i.topk(num_proposals_i, dim=1)
        topk_proposals_i = proposals_i[batch_idx[:, None], topk_idx]  # N x topk x 4
        topk_proposals.append(topk_proposals_i)
        topk_scores.append(topk_scores_i)
        level_ids.append(
            move_device_like(
                torch.full((num_proposals_i,), level_id, dtype=torch.int64, device=device), proposals[0]
            )
        )

    # 2. Concat all levels together
    topk_scores = cat(topk_scores, dim=1)
    topk_proposals = cat(topk_proposals, dim=1)
    level_ids = cat(level_ids, dim=0)

    # 3. For each image, run a per-level NMS, and choose topk results.
    results: list[Instances] = []
    for n, image_size in enumerate(image_sizes):
        boxes = Boxes(topk_proposals[n])
        scores_per_img = topk_scores[n]
        lvl = level_ids

        valid_mask = torch.isfinite(boxes.tensor).all(dim=1) & torch.isfinite(scores_per_img)
        if training:
            if not valid_mask.all():
                raise FloatingPointError("Predicted boxes or scores contain Inf/NaN. Training has diverged.")
        else:  # export-safe: filter unconditionally (a no-op when every proposal is finite)
            boxes = boxes[valid_mask]
            scores_per_img = scores_per_img[valid_mask]
            lvl = lvl[valid_mask]
        boxes.clip(image_size)

        # filter empty boxes
        keep = boxes.nonempty(threshold=min_box_size)
        boxes, scores_per_img, lvl = boxes[keep], scores_per_img[keep], lvl[keep]  # export-safe: no `if`

        if _SWITCHES["skip_nms"]:  # changes outputs: no suppression, highest objectness first
            keep = scores_per_img.argsort(descending=True)
        else:
            keep = proposal_utils.batched_nms(boxes.tensor, scores_per_img, lvl, nms_thresh)
        keep = keep[:post_nms_topk]  # keep is already sorted

        res = Instances(image_size)
        res.proposal_boxes = boxes[keep]
        res.objectness_logits = scores_per_img[keep]
        results.append(res)
    return results


def boxes_init(self: Boxes, tensor: torch.Tensor) -> None:
    """``Boxes.__init__`` with ``guard_or_false`` on the empty check.

    Fixes: ``Could not guard on data-dependent expression Eq(4*u0, 0)`` at
    ``if tensor.numel() == 0:``. Every ``Boxes`` built from filtered boxes has an unbacked length.

    Eager: ``guard_or_false`` returns the concrete answer, so an empty tensor is still reshaped to
    (0, 4). Under export the reshape is skipped; the boxes reaching here are already (N, 4), for
    which ``reshape((-1, 4))`` would change nothing.
    """
    if not isinstance(tensor, torch.Tensor):
        tensor = torch.as_tensor(tensor, dtype=torch.float32, device=torch.device("cpu"))
    else:
        tensor = tensor.to(torch.float32)
    if guard_or_false(tensor.numel() == 0):  # export-safe
        # Use reshape, so we don't end up creating a new tensor that does not depend on
        # the inputs (and consequently confuses jit)
        tensor = tensor.reshape((-1, 4)).to(dtype=torch.float32)
    assert tensor.dim() == 2 and tensor.size(-1) == 4, tensor.size()
    self.tensor = tensor


def boxes_clip(self: Boxes, box_size: tuple[int, int]) -> None:
    """``Boxes.clip`` whose finiteness check becomes a runtime check under export.

    Fixes: ``Could not guard on data-dependent expression Eq(u1, 1)`` at
    ``assert torch.isfinite(self.tensor).all()``: a Python ``assert`` on a tensor's value.

    Eager: the same ``assert`` (same ``AssertionError``). While exporting, the check is recorded
    as ``aten._assert_async`` in the program, which raises at run time if a box is not finite.
    """
    if torch.compiler.is_compiling():  # export-safe: keep the check, as a graph op
        torch._assert_async(torch.isfinite(self.tensor).all(), "Box tensor contains infinite or NaN!")
    else:
        assert torch.isfinite(self.tensor).all(), "Box tensor contains infinite or NaN!"
    h, w = box_size
    x1 = self.tensor[:, 0].clamp(min=0, max=w)
    y1 = self.tensor[:, 1].clamp(min=0, max=h)
    x2 = self.tensor[:, 2].clamp(min=0, max=w)
    y2 = self.tensor[:, 3].clamp(min=0, max=h)
    self.tensor = torch.stack((x1, y1, x2, y2), dim=-1)


def batched_nms(
    boxes: torch.Tensor, scores: torch.Tensor, idxs: torch.Tensor, iou_threshold: float
) -> torch.Tensor:
    """``detectron2.layers.batched_nms``: torchvision's export-safe ``batched_nms`` plus detectron2's cast.

    Fixes: ``Could not guard on data-dependent expression 4*u1 > 4000`` in torchvision's
    ``batched_nms`` (``if boxes.numel() > 4000``: loop over classes, or offset the boxes per class),
    and the ``if boxes.numel() == 0`` early return of the coordinate trick, which would fail next.
    detectron2's own function is torchvision's with a float cast in front, so this is the
    torchvision patch set's :func:`casebook.patches.torchvision.batched_nms` with the same cast; the
    patch installs the torchvision patch set's empty-safe coordinate trick with it.

    Eager: the same cast, then torchvision's choice of strategy on concrete sizes (see the
    torchvision patch). Under export the coordinate trick is traced for every size.
    """
    assert boxes.shape[-1] == 4
    boxes = boxes.float()  # fp16 does not have enough range for batched NMS
    return tv_patches.batched_nms(boxes, scores, idxs, iou_threshold)  # export-safe


def instances_set(self: Instances, name: str, value: Any) -> None:
    """``Instances.set`` that measures the new field with ``__len__()`` instead of ``len()``.

    Fixes: ``Could not extract specialized integer from data-dependent expression Min(1000, u2)``
    at ``data_len = len(value)``: Python's ``len()`` must return an ``int``, so it forces the
    symbolic number of proposals to a concrete value. ``value.__len__()`` returns the SymInt
    itself (detectron2's own ``Instances.__len__`` uses the same trick).

    Eager: the same number and the same ``assert``. Under export the length check becomes
    ``torch._check``, recorded as a runtime assert where it cannot be proven while tracing.
    """
    with warnings.catch_warnings(record=True):
        data_len = value.__len__()  # export-safe: was len(value)
    if len(self._fields):
        if torch.compiler.is_compiling():  # export-safe
            torch._check(
                self.__len__() == data_len,
                lambda: f"Adding a field of length {data_len} to a Instances of length {self.__len__()}",
            )
        else:
            assert len(self) == data_len, (
                f"Adding a field of length {data_len} to a Instances of length {len(self)}"
            )
    self._fields[name] = value


def convert_boxes_to_pooler_format(box_lists: list[Boxes]) -> torch.Tensor:
    """``poolers.convert_boxes_to_pooler_format`` building the batch-index column per image.

    Fixes: ``Could not extract specialized integer from data-dependent expression Min(1000, u2)``
    in ``shapes_to_tensor([x.__len__() for x in box_lists])``: ``torch.as_tensor`` of a list of
    symbolic sizes needs concrete ints. The column of batch indices (0 for every box of image 0,
    1 for image 1, ...) is built with ``torch.full((len_i, 1), i)`` per image instead of
    ``repeat_interleave(arange(N), sizes)``: a shape, not a tensor of sizes.

    Eager: the same (M, 5) tensor, column for column.
    """
    boxes = torch.cat([x.tensor for x in box_lists], dim=0)
    indices = torch.cat(  # export-safe: per-image full() instead of repeat_interleave(sizes)
        [
            torch.full((x.tensor.shape[0], 1), i, dtype=boxes.dtype, device=boxes.device)
            for i, x in enumerate(box_lists)
        ],
        dim=0,
    )
    return cat([indices, boxes], dim=1)


def fast_rcnn_inference_single_image(
    boxes: torch.Tensor,
    scores: torch.Tensor,
    image_shape: tuple[int, int],
    score_thresh: float,
    nms_thresh: float,
    topk_per_image: int,
) -> tuple[Instances, torch.Tensor]:
    """``fast_rcnn.fast_rcnn_inference_single_image`` without the branch on ``valid_mask.all()``.

    Fixes: ``Could not guard on data-dependent expression Eq(u7, 1)`` at
    ``if not valid_mask.all():`` in the box head's post-processing (the same pattern as the RPN's).

    Eager: the non-finite filter is always applied; with all-finite predictions it keeps every row
    in order, as skipping it did.

    With ``export_patches(skip_filter_confidence=True)`` the score threshold is replaced by the
    ``topk_per_image`` highest (box, class) scores, and with ``skip_nms=True`` the class-wise NMS
    is dropped. Both change outputs.
    """
    valid_mask = torch.isfinite(boxes).all(dim=1) & torch.isfinite(scores).all(dim=1)
    boxes = boxes[valid_mask]  # export-safe: filter unconditionally
    scores = scores[valid_mask]

    scores = scores[:, :-1]
    num_bbox_reg_classes = boxes.shape[1] // 4
    # Convert to Boxes to use the `clip` function ...
    boxes = Boxes(boxes.reshape(-1, 4))
    boxes.clip(image_shape)
    boxes = boxes.tensor.view(-1, num_bbox_reg_classes, 4)  # R x C x 4

    if _SWITCHES["skip_filter_confidence"]:  # changes outputs: top-k (box, class) pairs, no threshold
        num_classes = scores.shape[1]
        order = scores.flatten().argsort(descending=True)[:topk_per_image]
        filter_inds = torch.stack([order // num_classes, order % num_classes], dim=1)
        boxes = boxes[filter_inds[:, 0], 0 if num_bbox_reg_classes == 1 else filter_inds[:, 1]]
        scores = scores.flatten()[order]
    else:
        # 1. Filter results based on detection scores. It can make NMS more efficient
        #    by filtering out low-confidence detections.
        filter_mask = scores > score_thresh  # R x K
        # R' x 2. First column contains indices of the R predictions;
        # Second column contains indices of classes.
        filter_inds = filter_mask.nonzero()
        if num_bbox_reg_classes == 1:
            boxes = boxes[filter_inds[:, 0], 0]
        else:
            boxes = boxes[filter_mask]
        scores = scores[filter_mask]

    # 2. Apply NMS for each class independently.
    if _SWITCHES["skip_nms"]:  # changes outputs: overlapping detections are kept
        keep = scores.argsort(descending=True)
    else:
        keep = fast_rcnn.batched_nms(boxes, scores, filter_inds[:, 1], nms_thresh)
    if topk_per_image >= 0:
        keep = keep[:topk_per_image]
    boxes, scores, filter_inds = boxes[keep], scores[keep], filter_inds[keep]

    result = Instances(image_shape)
    result.pred_boxes = Boxes(boxes)
    result.scores = scores
    result.pred_classes = filter_inds[:, 1]
    return result, filter_inds[:, 0]


_original_paste_masks_in_image = mask_ops.paste_masks_in_image


def paste_masks_in_image(
    masks: torch.Tensor, boxes: torch.Tensor | Boxes, image_shape: tuple[int, int], threshold: float = 0.5
) -> torch.Tensor:
    """``mask_ops.paste_masks_in_image`` that pastes all masks in one chunk when their number is symbolic.

    Fixes: ``Could not extract specialized integer from data-dependent expression u14`` at
    ``N = len(masks)``. On CPU the original pastes the masks one by one (``torch.chunk`` into
    ``N`` chunks, then a Python loop), each into the tight integer window around its box: a loop
    whose trip count is the number of detections.

    Eager: untouched (the original is called whenever the number of masks is a concrete int).
    Under export the masks are pasted as the original does on GPU: one ``grid_sample`` over the
    whole image per mask (``skip_empty=False``). Inside each box's window that samples the same
    grid points as the CPU path; outside it the bilinear sample falls off the 28x28 mask into zero
    padding, so it stays below the 0.5 threshold and the window's zeros are reproduced. Parity
    checks on the pasted boolean masks confirm it.
    """
    if not _is_symbolic(masks.shape[0]):  # export-safe: eager (a concrete count) runs the original
        return _original_paste_masks_in_image(masks, boxes, image_shape, threshold)
    if not isinstance(boxes, torch.Tensor):
        boxes = boxes.tensor
    img_h, img_w = image_shape
    img_masks, _ = mask_ops._do_paste_mask(  # export-safe: one chunk, whole image
        masks[:, None, :, :], boxes, img_h, img_w, skip_empty=False
    )
    if threshold >= 0:
        return img_masks >= threshold
    # for visualization and debugging
    return (img_masks * 255).to(dtype=torch.uint8)


# --------------------------------------------------------------------------------------------------
# The patches, in the order torch.export meets the failures on mask_rcnn_R_50_FPN_3x.
# --------------------------------------------------------------------------------------------------


PATCHES: dict[str, Patch] = {
    patch.name: patch
    for patch in [
        Patch(
            "image_list_int_padding",
            "detectron2.structures.ImageList.from_tensors",
            "no error: padded image size becomes unbacked (u0, u1)",
            image_list_from_tensors,
            lambda: replace(ImageList, "from_tensors", staticmethod(image_list_from_tensors)),
        ),
        Patch(
            "rpn_filters_without_branches",
            "detectron2.modeling.proposal_generator.proposal_utils.find_top_rpn_proposals",
            "Could not guard on data-dependent expression Eq(u0, 1) (`if not valid_mask.all()`)",
            find_top_rpn_proposals,
            lambda: undo_all(
                replace(proposal_utils, "find_top_rpn_proposals", find_top_rpn_proposals),
                replace(rpn, "find_top_rpn_proposals", find_top_rpn_proposals),
            ),
        ),
        Patch(
            "boxes_init_empty_check",
            "detectron2.structures.Boxes.__init__",
            "Could not guard on data-dependent expression Eq(4*u0, 0)",
            boxes_init,
            lambda: replace(Boxes, "__init__", boxes_init),
        ),
        Patch(
            "boxes_clip_finite_check",
            "detectron2.structures.Boxes.clip",
            "Could not guard on data-dependent expression Eq(u1, 1) (`assert torch.isfinite(...).all()`)",
            boxes_clip,
            lambda: replace(Boxes, "clip", boxes_clip),
        ),
        Patch(
            "batched_nms_dispatch",
            "detectron2.layers.batched_nms (-> torchvision.ops.boxes.batched_nms)",
            "Could not guard on data-dependent expression 4*u1 > 4000",
            batched_nms,
            lambda: undo_all(
                replace(d2_nms, "batched_nms", batched_nms),
                replace(d2_layers, "batched_nms", batched_nms),
                replace(proposal_utils, "batched_nms", batched_nms),
                replace(fast_rcnn, "batched_nms", batched_nms),
                replace(box_ops, "_batched_nms_coordinate_trick", tv_patches.batched_nms_coordinate_trick),
            ),
        ),
        Patch(
            "instances_set_length",
            "detectron2.structures.Instances.set",
            "Could not extract specialized integer from data-dependent expression Min(1000, u2) (`len(value)`)",
            instances_set,
            lambda: replace(Instances, "set", instances_set),
        ),
        Patch(
            "pooler_batch_index",
            "detectron2.modeling.poolers.convert_boxes_to_pooler_format",
            "Could not extract specialized integer from data-dependent expression Min(1000, u2) (`shapes_to_tensor`)",
            convert_boxes_to_pooler_format,
            lambda: replace(poolers, "convert_boxes_to_pooler_format", convert_boxes_to_pooler_format),
        ),
        Patch(
            "fast_rcnn_filters_without_branches",
            "detectron2.modeling.roi_heads.fast_rcnn.fast_rcnn_inference_single_image",
            "Could not guard on data-dependent expression Eq(u7, 1) (`if not valid_mask.all()`)",
            fast_rcnn_inference_single_image,
            lambda: replace(fast_rcnn, "fast_rcnn_inference_single_image", fast_rcnn_inference_single_image),
        ),
        Patch(
            "paste_masks_single_chunk",
            "detectron2.layers.mask_ops.paste_masks_in_image",
            "Could not extract specialized integer from data-dependent expression u14 (`len(masks)`)",
            paste_masks_in_image,
            lambda: replace(mask_ops, "paste_masks_in_image", paste_masks_in_image),
        ),
        Patch(
            "nms_fake_allows_empty",
            "the torchvision::nms fake kernel (torchvision/_meta_registrations.py)",
            "at run time: Runtime assertion failed for expression u9 >= 2",
            tv_patches.nms_fake,
            tv_patches.install_nms_fake,
        ),
    ]
}
"""Every patch, by name, in the order export meets the failures."""


@contextmanager
def export_patches(
    *names: str, skip_nms: bool = False, skip_filter_confidence: bool = False
) -> Iterator[tuple[str, ...]]:
    """Apply the named patches (all of :data:`PATCHES` if none are named) inside the block.

    The originals are restored on exit, also when the block raises. Yields the applied names.

    ``skip_nms`` and ``skip_filter_confidence`` CHANGE THE MODEL'S OUTPUTS (no eager parity): the
    first replaces NMS in the RPN and in the box head by a sort on the score, the second replaces
    the box head's score threshold by the ``topk_per_image`` best (box, class) pairs. They act
    through the patched ``find_top_rpn_proposals`` / ``fast_rcnn_inference_single_image`` and
    therefore need those patches applied.
    """
    chosen = check_names(PATCHES, names)
    if skip_nms and not {"rpn_filters_without_branches", "fast_rcnn_filters_without_branches"} <= set(chosen):
        raise ValueError("skip_nms acts through the patched RPN and box-head functions: apply both patches")
    if skip_filter_confidence and "fast_rcnn_filters_without_branches" not in chosen:
        raise ValueError("skip_filter_confidence acts through fast_rcnn_filters_without_branches: apply it")
    saved_switches = dict(_SWITCHES)
    try:
        with apply(PATCHES, *chosen) as applied:
            _SWITCHES.update(skip_nms=skip_nms, skip_filter_confidence=skip_filter_confidence)
            yield applied
    finally:
        _SWITCHES.update(saved_switches)


def patch_table() -> str:
    """The patches as a Markdown table (name, what it replaces, the error it fixes)."""
    return _patch_table(PATCHES)


# --------------------------------------------------------------------------------------------------
# Pytree registration of detectron2's Boxes and Instances: the alternative to TracingAdapter.
# --------------------------------------------------------------------------------------------------

BOXES_SERIALIZED_NAME = "detectron2.structures.Boxes"
INSTANCES_SERIALIZED_NAME = "detectron2.structures.Instances"


def _boxes_flatten(boxes: Boxes) -> tuple[list[torch.Tensor], None]:
    return [boxes.tensor], None


def _boxes_flatten_with_keys(boxes: Boxes):
    return [(GetAttrKey("tensor"), boxes.tensor)], None


def _boxes_unflatten(children, context: None) -> Boxes:
    boxes = object.__new__(Boxes)  # no __init__: its checks would run again on every unflatten
    boxes.tensor = children[0]
    return boxes


def _instances_flatten(instances: Instances):
    """Children: the field values in order. Context: (image_size, field names), both static."""
    names = tuple(instances.get_fields())
    return [instances.get(name) for name in names], (tuple(instances.image_size), names)


def _instances_flatten_with_keys(instances: Instances):
    children, context = _instances_flatten(instances)
    return [(GetAttrKey(name), child) for name, child in zip(context[1], children, strict=True)], context


def _instances_unflatten(children, context) -> Instances:
    image_size, names = context
    instances = Instances(image_size)
    for name, child in zip(names, children, strict=True):
        instances._fields[name] = child  # not .set(): no length checks on rebuild
    return instances


def _instances_context_to_json(context) -> dict:
    image_size, names = context
    return {"image_size": [int(s) for s in image_size], "fields": list(names)}


def _instances_context_from_json(data: dict):
    return tuple(data["image_size"]), tuple(data["fields"])


def register_pytree_nodes() -> None:
    """Register detectron2's ``Boxes`` and ``Instances`` as pytree nodes (idempotent).

    After this, ``torch.export`` can return them from a program and ``torch.export.save``/``load``
    can serialize the output spec (under the names ``detectron2.structures.Boxes`` and
    ``detectron2.structures.Instances``; a process that loads the program must register them
    too). An ``Instances``' image size and field names are pytree *context*: they are fixed when
    the program is exported.
    """
    register_node(
        Boxes,
        _boxes_flatten,
        _boxes_unflatten,
        serialized_type_name=BOXES_SERIALIZED_NAME,
        flatten_with_keys=_boxes_flatten_with_keys,
    )
    register_node(
        Instances,
        _instances_flatten,
        _instances_unflatten,
        serialized_type_name=INSTANCES_SERIALIZED_NAME,
        flatten_with_keys=_instances_flatten_with_keys,
        context_to_json=_instances_context_to_json,
        context_from_json=_instances_context_from_json,
    )


def unregister_pytree_nodes() -> None:
    """Undo :func:`register_pytree_nodes` (see :func:`casebook.pytree_nodes.unregister_nodes`)."""
    unregister_nodes(Boxes, Instances)
