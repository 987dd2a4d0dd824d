"""The loop-free mask paster and keypoint decoder against torchvision's per-detection loops.

Inputs cover what the heads meet: boxes inside the image, boxes that leave it on every side
(expanded masks do), boxes thinner than a pixel, non-square images, one detection and none.
"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torchvision.models.detection import roi_heads
from torchvision.models.detection.faster_rcnn import FastRCNNConvFCHead

from casebook.detection_parity import TOLERANCES
from casebook.patches import torchvision_heads
from casebook.patches.torchvision import export_patches
from casebook.patches.torchvision_heads import (
    cubic_coefficients,
    heatmaps_to_keypoints,
    linear_resize_weights,
    paste_masks_in_image,
    roi_heads_forward_knowing_image_size,
)

PROBABILITY_TOLERANCE = 1e-6
# Keypoint scores: the detection zoo's policy, relative and absolute. A score near zero differs
# from the loop's by float rounding too, which a relative tolerance alone does not allow.
SCORE_RTOL, SCORE_ATOL = TOLERANCES["keypoints_scores"]


def _boxes(count, height, width, seed):
    """Boxes as postprocess_detections leaves them: inside the image, at least ~0.01 px wide."""
    generator = torch.Generator().manual_seed(seed)
    x1 = torch.rand(count, generator=generator) * (width - 1)
    y1 = torch.rand(count, generator=generator) * (height - 1)
    x2 = x1 + torch.rand(count, generator=generator) * (width - x1)
    y2 = y1 + torch.rand(count, generator=generator) * (height - y1)
    boxes = torch.stack([x1, y1, x2, y2], dim=1)
    if count >= 4:
        boxes[0] = torch.tensor([0.0, 0.0, width, height])  # the whole image: expanded, it leaves it
        boxes[1] = torch.tensor([width - 3.0, height - 2.0, width, height])  # a corner
        boxes[2] = torch.tensor([5.0, 5.0, 5.02, 7.0])  # thinner than a pixel
        boxes[3] = torch.tensor([0.0, 10.0, 0.5, 10.4])
    return boxes


@pytest.mark.parametrize("size", [8, 30, 56])
@pytest.mark.parametrize("out_size", [1, 5, 30, 97])
def test_linear_resize_weights_reproduce_interpolate(size, out_size):
    signal = torch.rand(1, 1, size, generator=torch.Generator().manual_seed(size))
    expected = F.interpolate(signal[None], size=(1, out_size), mode="bilinear", align_corners=False)[0, 0, 0]
    weights = linear_resize_weights(torch.tensor([out_size]), torch.arange(out_size)[None], size)[0]
    torch.testing.assert_close(weights @ signal[0, 0], expected, rtol=0, atol=1e-6)


def test_cubic_coefficients_sum_to_one():
    t = torch.linspace(0, 1, 11)
    assert torch.allclose(sum(cubic_coefficients(t)), torch.ones(11))


@pytest.mark.parametrize(("count", "height", "width"), [(12, 60, 80), (5, 97, 33), (1, 40, 40), (0, 50, 70)])
def test_pasted_masks_match_the_loop(count, height, width):
    generator = torch.Generator().manual_seed(count + height)
    masks = torch.rand(count, 1, 28, 28, generator=generator)
    boxes = _boxes(count, height, width, seed=count)
    expected = roi_heads.paste_masks_in_image(masks, boxes, (height, width))
    actual = paste_masks_in_image(masks, boxes, (height, width))
    assert actual.shape == expected.shape == (count, 1, height, width)
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual, expected, rtol=0, atol=PROBABILITY_TOLERANCE)
    # Thresholded as torchvision's users do: the same pixels, except where the loop's probability is
    # within the tolerance of the threshold.
    near_threshold = (expected - 0.5).abs() <= PROBABILITY_TOLERANCE
    assert torch.equal((actual > 0.5)[~near_threshold], (expected > 0.5)[~near_threshold])


def test_pasted_mask_is_zero_outside_its_box():
    masks = torch.ones(1, 1, 28, 28)
    actual = paste_masks_in_image(masks, torch.tensor([[10.0, 20.0, 30.0, 40.0]]), (64, 64))[0, 0]
    rows, cols = actual.nonzero(as_tuple=True)
    # The paster expands the box by 30/28 (a padded 30 x 30 mask) around its centre: 9.3 .. 30.7 -> 9 .. 30.
    assert (rows.min().item(), rows.max().item()) == (19, 40)
    assert (cols.min().item(), cols.max().item()) == (9, 30)


@pytest.mark.parametrize(("count", "height", "width"), [(9, 70, 50), (1, 33, 90), (0, 40, 40)])
def test_keypoints_match_the_loop(count, height, width):
    generator = torch.Generator().manual_seed(count)
    maps = torch.randn(count, 17, 56, 56, generator=generator)
    rois = _boxes(count, height, width, seed=count + 1)
    expected_xy, expected_scores = roi_heads.heatmaps_to_keypoints(maps, rois)
    actual_xy, actual_scores = heatmaps_to_keypoints(maps, rois)
    assert actual_xy.shape == expected_xy.shape == (count, 17, 3)
    assert actual_scores.shape == expected_scores.shape == (count, 17)
    # The same pixel for every keypoint; its score differs from the loop's in the last bits, because
    # ATen's bicubic kernel rounds differently (its own decomposition differs from it as much).
    assert torch.equal(actual_xy, expected_xy)
    torch.testing.assert_close(actual_scores, expected_scores, rtol=SCORE_RTOL, atol=SCORE_ATOL)


def test_keypoint_canvas_bounded_by_the_image_changes_nothing():
    maps = torch.randn(5, 17, 56, 56, generator=torch.Generator().manual_seed(5))
    rois = _boxes(5, 60, 80, seed=5)  # the first box is the whole image
    expected_xy, expected_scores = heatmaps_to_keypoints(maps, rois)
    xy, scores = heatmaps_to_keypoints(maps, rois, image_size=(60, 80))
    assert torch.equal(xy, expected_xy) and torch.equal(scores, expected_scores)


def test_keypoint_boxes_larger_than_the_image_are_refused_with_what_to_do():
    maps = torch.randn(5, 17, 56, 56, generator=torch.Generator().manual_seed(5))
    rois = _boxes(5, 60, 80, seed=5)
    with pytest.raises(
        ValueError,
        match=r"a box is 60 x 80 pixels .* larger than the image, 60 x 50: .*clip_boxes_to_image",
    ):
        heatmaps_to_keypoints(maps, rois, image_size=(60, 50))


def test_roi_heads_forward_records_the_largest_image_while_it_runs():
    seen = []

    def forward(self, features, proposals, image_shapes, targets=None):
        seen.append(torchvision_heads._IMAGE_SIZE.current)
        raise ValueError("inside the heads")

    with pytest.raises(ValueError, match="inside the heads"):
        roi_heads_forward_knowing_image_size(forward)(None, {}, [], [(60, 80), (90, 40)])
    assert seen == [(90, 80)]
    assert torchvision_heads._IMAGE_SIZE.current is None  # restored, also when the heads raise
    with pytest.raises(ValueError, match="inside the heads"):
        roi_heads_forward_knowing_image_size(forward)(None, {}, [], [])
    assert seen[-1] is None  # no image, no bound: torchvision's own checks decide
    original = roi_heads.RoIHeads.forward
    with export_patches("heatmaps_to_keypoints_without_loop"):
        assert roi_heads.RoIHeads.forward is not original
    assert roi_heads.RoIHeads.forward is original


def test_keypoints_on_a_plateau_take_the_first_maximum_like_the_loop():
    maps = torch.zeros(2, 3, 56, 56)  # every pixel ties
    rois = torch.tensor([[0.0, 0.0, 20.0, 10.0], [5.0, 5.0, 40.0, 45.0]])
    expected_xy, _ = roi_heads.heatmaps_to_keypoints(maps, rois)
    actual_xy, _ = heatmaps_to_keypoints(maps, rois)
    assert torch.equal(actual_xy, expected_xy)


# ------------------------------------------------------------------------------------------------
# Upstream status: the stock loops (and the v2 heads' BatchNorm) still fail under export on a
# data-dependent number of detections. When a torchvision or PyTorch release fixes one, its test
# fails: delete that patch.
# ------------------------------------------------------------------------------------------------

GuardError = torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode


class _PasteConfident(nn.Module):
    def forward(self, masks, boxes, scores):
        keep = torch.where(scores > 0.5)[0]
        return roi_heads.paste_masks_in_image(masks[keep], boxes[keep], (60, 80))


class _KeypointsOfConfident(nn.Module):
    def forward(self, maps, boxes, scores):
        keep = torch.where(scores > 0.5)[0]
        return roi_heads.heatmaps_to_keypoints(maps[keep], boxes[keep])


class _BoxHeadOfConfident(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = FastRCNNConvFCHead((4, 7, 7), [8], [16], norm_layer=nn.BatchNorm2d).eval()

    def forward(self, features, scores):
        return self.head(features[torch.where(scores > 0.5)[0]])


def _scores():
    return torch.tensor([0.9, 0.2, 0.7, 0.6, 0.1, 0.8])


def _check_program(module, args, empty_args):
    program = torch.export.export(module, args, strict=False)
    return program.module()(*args), program.module()(*empty_args)


def test_upstream_still_needs_paste_masks_without_loop():
    masks = torch.rand(6, 1, 28, 28, generator=torch.Generator().manual_seed(3))
    args = (masks, _boxes(6, 60, 80, seed=3), _scores())
    with pytest.raises(GuardError, match=r"Could not guard on data-dependent expression Eq\(u\d+, 0\)"):
        torch.export.export(_PasteConfident(), args, strict=False)
    with export_patches("paste_masks_without_loop"):
        pasted, empty = _check_program(_PasteConfident(), args, (*args[:2], args[2] * 0))
    torch.testing.assert_close(pasted, _PasteConfident()(*args), rtol=0, atol=PROBABILITY_TOLERANCE)
    assert empty.shape == (0, 1, 60, 80)


@pytest.mark.slow
def test_upstream_still_needs_heatmaps_to_keypoints_without_loop():
    maps = torch.randn(6, 17, 56, 56, generator=torch.Generator().manual_seed(4))
    args = (maps, _boxes(6, 60, 80, seed=4), _scores())
    with pytest.raises(
        GuardError, match=r"Could not extract specialized integer from data-dependent expression u\d+"
    ):
        torch.export.export(_KeypointsOfConfident(), args, strict=False)
    with export_patches("heatmaps_to_keypoints_without_loop"):
        (xy, scores), (empty_xy, empty_scores) = _check_program(
            _KeypointsOfConfident(), args, (*args[:2], args[2] * 0)
        )
    expected_xy, expected_scores = _KeypointsOfConfident()(*args)
    assert torch.equal(xy, expected_xy)
    torch.testing.assert_close(scores, expected_scores, rtol=SCORE_RTOL, atol=SCORE_ATOL)
    assert empty_xy.shape == (0, 17, 3) and empty_scores.shape == (0, 17)


def test_upstream_still_needs_roi_head_batch_norm():
    torch.manual_seed(0)
    head = _BoxHeadOfConfident()
    for norm in head.modules():
        if isinstance(norm, nn.BatchNorm2d):
            norm.running_mean.uniform_(-1, 1)
            norm.running_var.uniform_(0.5, 2)
    args = (torch.randn(6, 4, 7, 7), _scores())
    with pytest.raises(GuardError, match=r"Could not guard on data-dependent expression Eq\(392\*u\d+, 0\)"):
        torch.export.export(head, args, strict=False)
    expected = head(*args)
    with export_patches("roi_head_batch_norm"):
        assert torch.equal(head(*args), expected)  # eager: the same kernel, bit for bit
        features, empty = _check_program(head, args, (args[0], args[1] * 0))
    assert torch.equal(features, expected)
    assert empty.shape == (0, 16)
    assert "forward" not in vars(FastRCNNConvFCHead)  # restored: inherited from nn.Sequential again


def test_roi_head_batch_norm_leaves_training_mode_alone():
    head = _BoxHeadOfConfident().train()
    features = torch.randn(5, 4, 7, 7)
    torch.manual_seed(1)
    expected = head.head(features)
    with export_patches("roi_head_batch_norm"):
        torch.manual_seed(1)
        actual = head.head(features)
    assert torch.equal(actual, expected)
