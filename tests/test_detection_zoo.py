"""detection_zoo: the builder list, the keypoint canvas read from a program, the parity images.

`export_and_compare` itself, the dynamic programs and `checked_detector` on them are proven on the
detection zoo page, on every builder (its cells assert what these tests asserted on one builder, so
the book build no longer exports a detector twice for them); the keypoint canvas is read here from
the decoder exported alone.
"""

import pytest
import torch

from casebook.models.detection_zoo import (
    DETECTORS,
    build_detector,
    example_size,
    keypoint_canvas,
)
from casebook.models.detection_zoo_proof import parity_images
from casebook.patches.torchvision_heads import heatmaps_to_keypoints


def test_twelve_detectors():
    assert len(DETECTORS) == 12  # torchvision 0.29.1
    assert "maskrcnn_resnet50_fpn_v2" in DETECTORS and "ssdlite320_mobilenet_v3_large" in DETECTORS


@pytest.mark.parametrize("call", [build_detector, example_size])
def test_unknown_detector_names_the_choices(call):
    with pytest.raises(ValueError, match=r"'yolo' is not a detection builder .* choose one of: fasterrcnn"):
        call("yolo")


class DecodeKeypoints(torch.nn.Module):
    """Keypoint R-CNN's decoder alone (the patched one), optionally told the image size."""

    def __init__(self, image_size=None):
        super().__init__()
        self.image_size = image_size

    def forward(self, maps, boxes):
        return heatmaps_to_keypoints(maps, boxes, self.image_size)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("image_size", "bounds"),
    [(None, {"H": (1, None), "W": (1, None)}), ((320, 256), {"H": (1, 320), "W": (1, 256)})],
)
def test_keypoint_canvas_is_bounded_by_the_image_size_the_decoder_is_given(image_size, bounds):
    boxes = torch.tensor([[0.0, 0.0, 256.0, 320.0], [5.0, 5.0, 40.0, 90.0], [100.0, 30.0, 200.0, 60.0]])
    maps = torch.randn(len(boxes), 17, 56, 56, generator=torch.Generator().manual_seed(0))
    program = torch.export.export(DecodeKeypoints(image_size), (maps, boxes), strict=False)
    shape, canvas = keypoint_canvas(program)
    assert shape[:2] == (3, 17) and canvas == bounds


def test_keypoint_canvas_of_a_program_without_one_says_what_to_export():
    program = torch.export.export(torch.nn.ReLU(), (torch.rand(2, 3),))
    with pytest.raises(ValueError, match="no keypoint decoding canvas .* heatmaps_to_keypoints_without_loop"):
        keypoint_canvas(program)


def test_parity_images_stay_inside_the_range_and_include_its_bottom():
    sizes = [tuple(image.shape[1:]) for _, image in parity_images("ssd300_vgg16", 268, 331)]
    assert sizes == [(268, 268), example_size("ssd300_vgg16"), (331, 294)]
    unbounded = [tuple(image.shape[1:]) for _, image in parity_images("fcos_resnet50_fpn", 129, None)]
    assert unbounded[0] == (129, 129) and unbounded[2] == (352, 315)
