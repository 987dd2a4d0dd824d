"""detection_zoo: the builder list, the size range read from a program, and the parity policy.

`export_and_compare` runs once, on the smallest R-CNN, and the tests of the dynamic program and
`checked_detector` use the program it saved; the keypoint canvas is read from the decoder exported
alone. The detection zoo page runs the whole proof on every builder.
"""

import re

import pytest
import torch

from casebook.detection_parity import exact_differences
from casebook.models.detection_zoo import (
    DETECTORS,
    INPUT_ADVICE,
    build_detector,
    checked_detector,
    eager,
    example_size,
    keypoint_canvas,
    size_range,
)
from casebook.models.detection_zoo_proof import export_and_compare, parity_images
from casebook.models.detector_inputs import EXPECTED
from casebook.models.images import load_image
from casebook.patches.torchvision_heads import heatmaps_to_keypoints


def test_twelve_detectors():
    assert len(DETECTORS) == 12  # torchvision 0.29.1
    assert "maskrcnn_resnet50_fpn_v2" in DETECTORS and "ssdlite320_mobilenet_v3_large" in DETECTORS


@pytest.mark.parametrize("call", [build_detector, example_size])
def test_unknown_detector_names_the_choices(call):
    with pytest.raises(ValueError, match=r"'yolo' is not a detection builder .* choose one of: fasterrcnn"):
        call("yolo")


SMALLEST_RCNN = "fasterrcnn_mobilenet_v3_large_320_fpn"


@pytest.fixture(scope="module")
def proven(tmp_path_factory):
    """export_and_compare on the smallest R-CNN, once for the module: its result and where it saved
    the programs. (The detection zoo page runs it on every builder.)"""
    saved = tmp_path_factory.mktemp("zoo")
    return export_and_compare(SMALLEST_RCNN, saved, save_static=True, save_dynamic=True), saved


@pytest.fixture(scope="module")
def dynamic_program(proven):
    _, saved = proven
    return torch.export.load(str(saved / f"{SMALLEST_RCNN}.dynamic.pt2"))


@pytest.mark.slow
def test_export_and_compare_checks_a_builder_three_ways_and_saves_two_programs(proven):
    result, saved = proven
    assert result.size_range == (65, None)
    assert result.row["H and W"] == "65 to ∞"
    assert all(result.row[f"{mode} (CPU s)"] > 0 for mode in ("static", "dynamic", "strict"))
    assert result.export_wall_seconds > 0
    assert len(result.row["detections per image"].split("/")) == 3
    assert re.fullmatch(r"image [123]|threshold 1\.0", result.row["no detections"])
    static = torch.export.load(str(saved / f"{SMALLEST_RCNN}.static.pt2"))
    assert size_range(static) == {"H": (320, 320), "W": (256, 256)}
    assert result.bad_inputs.keys() == EXPECTED.keys()
    assert result.bad_inputs["uint8 pixels, 0 to 255"][1] == "runs"  # the program, unchecked


@pytest.mark.slow
def test_the_dynamic_program_takes_new_sizes_and_matches_eager(dynamic_program):
    assert size_range(dynamic_program) == {"H": (65, None), "W": (65, None)}
    model = build_detector(SMALLEST_RCNN)
    image = load_image("coffee", (200, 333))
    differences = exact_differences(eager(model, image), dynamic_program.module()([image])[0])
    assert differences["tied at the cut"] == 0


@pytest.mark.slow
def test_a_size_below_the_range_is_rejected_by_the_program(dynamic_program):
    with pytest.raises(AssertionError, match=r"Guard failed: images\[0\].size\(\)\[1\] >= 65"):
        dynamic_program.module()([torch.rand(3, 64, 100)])


@pytest.mark.slow
def test_checked_detector_refuses_what_the_program_would_run_or_garble(dynamic_program):
    checked = checked_detector(dynamic_program)
    image = load_image("coffee", (200, 333))
    with pytest.raises(
        TypeError, match=re.escape("images[0] is torch.uint8; ") + ".*" + re.escape(INPUT_ADVICE)
    ):
        checked([(image * 255).to(torch.uint8)])
    with pytest.raises(
        ValueError, match=re.escape("images[0].shape[1] is 64; the program accepts 65 or more")
    ):
        checked([torch.rand(3, 64, 100)])
    with pytest.raises(ValueError, match=re.escape("images must be a list of 1, got a list of 0")):
        checked([])
    expected = dynamic_program.module()([image])[0]
    assert all(torch.equal(value, checked([image])[0][key]) for key, value in expected.items())


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
