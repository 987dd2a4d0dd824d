"""SSD's per-class candidate selection in one ``topk`` instead of one per class.

torchvision 0.29.1's ``SSD.postprocess_detections`` loops over the classes (90 for COCO): for each,
it keeps the scores above ``score_thresh`` (a boolean mask, so a data-dependent number of them),
then takes the ``topk_candidates`` best with ``topk``. That exports, but every class adds a mask,
a ``topk`` whose ``k`` is data-dependent, and unbacked sizes for export to reason about: 90 times
over. Torch-TensorRT runs ``topk`` only with a ``k`` known when the engine is built, so those 90
stay in PyTorch and split the graph.

The replacement takes the ``topk_candidates`` best anchors of every class at once, with a ``k``
that depends only on the number of anchors, and drops the ones at or below the threshold
afterwards. The top ``k`` of the scores above a threshold are the top ``k`` of all scores that are
above it, so the candidates are the same, in the same order (class by class, best first), except
among scores that are exactly equal, where ``topk`` may pick and order them otherwise.
:mod:`casebook.patches.torchvision` registers it as a patch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torchvision.models.detection.ssd import SSD
from torchvision.ops import boxes as box_ops


def postprocess_detections(
    self: SSD,
    head_outputs: dict[str, Tensor],
    image_anchors: list[Tensor],
    image_shapes: list[tuple[int, int]],
) -> list[dict[str, Tensor]]:
    """``SSD.postprocess_detections`` with one ``topk`` over all classes instead of a loop of 90.

    The loop over images and everything after the candidates are chosen (``batched_nms``, the cut
    to ``detections_per_img``) are torchvision's lines.
    """
    bbox_regression = head_outputs["bbox_regression"]
    pred_scores = F.softmax(head_outputs["cls_logits"], dim=-1)

    num_classes = pred_scores.size(-1)
    device = pred_scores.device

    detections: list[dict[str, Tensor]] = []

    for boxes, scores, anchors, image_shape in zip(
        bbox_regression, pred_scores, image_anchors, image_shapes, strict=False
    ):
        boxes = self.box_coder.decode_single(boxes, anchors)
        boxes = box_ops.clip_boxes_to_image(boxes, image_shape)

        # The best anchors of every class (column 0 is the background) in one topk whose k is known
        # from the number of anchors; then the threshold, which the loop applied first.
        k = torch.sym_min(self.topk_candidates, scores.shape[0])  # export-safe
        top_scores, top_anchors = scores[:, 1:].topk(k, dim=0)  # export-safe: (k, classes - 1), best first
        top_scores, top_anchors = top_scores.T, top_anchors.T  # export-safe: class by class, as the loop
        labels = torch.arange(1, num_classes, device=device)[:, None].expand_as(top_anchors)  # export-safe
        above = top_scores > self.score_thresh  # export-safe
        image_scores = top_scores[above]  # export-safe
        image_boxes = boxes[top_anchors[above]]  # export-safe
        image_labels = labels[above]  # export-safe

        # non-maximum suppression
        keep = box_ops.batched_nms(image_boxes, image_scores, image_labels, self.nms_thresh)
        keep = keep[: self.detections_per_img]

        detections.append(
            {
                "boxes": image_boxes[keep],
                "scores": image_scores[keep],
                "labels": image_labels[keep],
            }
        )
    return detections
