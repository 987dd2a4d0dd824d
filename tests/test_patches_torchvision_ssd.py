"""ssd_candidates_in_one_topk: the same detections as torchvision's loop over classes, one topk exported."""

from types import SimpleNamespace

import pytest
import torch
from detection_outputs import assert_identical_detections
from torch import nn
from torchvision.models.detection import _utils as det_utils
from torchvision.models.detection.ssd import SSD

from casebook.models import detection_zoo as zoo
from casebook.patches.torchvision import PATCHES, export_patches

SSD_BOX_WEIGHTS = (10.0, 10.0, 5.0, 5.0)  # what torchvision's SSD builders give their BoxCoder


def _postprocess_settings(score_thresh=0.01, topk_candidates=300, detections_per_img=200):
    """The attributes of an SSD that ``postprocess_detections`` reads."""
    return SimpleNamespace(
        box_coder=det_utils.BoxCoder(SSD_BOX_WEIGHTS),
        score_thresh=score_thresh,
        topk_candidates=topk_candidates,
        nms_thresh=0.55,
        detections_per_img=detections_per_img,
    )


def _anchors(count, height, width, generator):
    centre = torch.rand(count, 2, generator=generator) * torch.tensor([width, height])
    half = 4 + torch.rand(count, 2, generator=generator) * 40
    return torch.cat([centre - half, centre + half], dim=1)


def _head_outputs(images, anchors, classes, generator, logit_scale=3.0):
    return {
        "bbox_regression": torch.randn(images, anchors, 4, generator=generator) * 0.1,
        "cls_logits": torch.randn(images, anchors, classes, generator=generator) * logit_scale,
    }


@pytest.mark.parametrize(
    ("anchors", "classes", "settings", "case"),
    [
        (3000, 91, {}, "SSDlite's sizes: more candidates than detections_per_img"),
        (40, 7, {"topk_candidates": 400}, "fewer anchors than topk_candidates"),
        (500, 11, {"score_thresh": 1.0}, "no score above the threshold: zero detections"),
        (800, 21, {"score_thresh": 0.2, "topk_candidates": 5}, "a few classes above a high threshold"),
    ],
)
def test_candidates_in_one_topk_match_the_loop(anchors, classes, settings, case):
    generator = torch.Generator().manual_seed(anchors)
    shapes = [(300, 320), (260, 200)]  # two images, non-square, of different sizes
    head = _head_outputs(len(shapes), anchors, classes, generator)
    image_anchors = [_anchors(anchors, h, w, generator) for h, w in shapes]
    model = _postprocess_settings(**settings)
    expected = SSD.postprocess_detections(model, head, image_anchors, shapes)
    with export_patches("ssd_candidates_in_one_topk"):
        actual = SSD.postprocess_detections(model, head, image_anchors, shapes)
    assert_identical_detections(expected, actual)
    counts = [len(d["scores"]) for d in expected]
    if "zero" in case:
        assert counts == [0, 0]
    else:
        assert all(counts), case  # something to compare
        assert all(d["scores"].unique().numel() == len(d["scores"]) for d in expected)  # distinct scores


@pytest.fixture(scope="module")
def ssdlite():
    return zoo.build_detector("ssdlite320_mobilenet_v3_large")


@pytest.mark.slow
@pytest.mark.parametrize(
    "image",
    [
        zoo.example_image("ssdlite320_mobilenet_v3_large"),
        zoo.example_image("ssdlite320_mobilenet_v3_large", "coffee")[:, :300, :260],  # non-square, smaller
        torch.zeros(3, 320, 320),
    ],
    ids=["astronaut", "coffee-300x260", "blank"],
)
def test_eager_ssdlite_detections_unchanged(ssdlite, image):
    expected = zoo.eager(ssdlite, image)
    with export_patches("ssd_candidates_in_one_topk"):
        actual = zoo.eager(ssdlite, image)
    assert_identical_detections([expected], [actual])
    assert len(expected["scores"]) > 0


@pytest.mark.slow
def test_eager_ssdlite_without_detections_unchanged(ssdlite, monkeypatch):
    monkeypatch.setattr(ssdlite, "score_thresh", 1.0)  # no softmax score exceeds it
    image = zoo.example_image("ssdlite320_mobilenet_v3_large")
    with export_patches("ssd_candidates_in_one_topk"):
        detections = zoo.eager(ssdlite, image)
    assert detections["boxes"].shape == (0, 4) and detections["labels"].dtype == torch.int64


class _PostprocessOneImage(nn.Module):
    """``SSD.postprocess_detections`` alone, for one 120 x 160 image and 5 classes besides the background."""

    def __init__(self):
        super().__init__()
        self.settings = _postprocess_settings(score_thresh=0.3, topk_candidates=20, detections_per_img=10)

    def forward(self, bbox_regression, cls_logits, anchors):
        head = {"bbox_regression": bbox_regression, "cls_logits": cls_logits}
        detections = SSD.postprocess_detections(self.settings, head, [anchors], [(120, 160)])[0]
        return detections["boxes"], detections["scores"], detections["labels"]


def _topk_sizes(program):
    """The ``k`` of each ``topk`` in the program: an int, or the graph node that computes a data-dependent one."""
    return [
        node.args[1]
        for node in program.graph.nodes
        if node.op == "call_function" and node.target == torch.ops.aten.topk.default
    ]


@pytest.mark.slow
def test_upstream_still_needs_ssd_candidates_in_one_topk():
    generator = torch.Generator().manual_seed(5)
    head = _head_outputs(1, 200, 6, generator)
    args = (head["bbox_regression"], head["cls_logits"], _anchors(200, 120, 160, generator))
    module = _PostprocessOneImage()
    others = [name for name in PATCHES if name != "ssd_candidates_in_one_topk"]  # NMS needs its own
    with export_patches(*others):
        upstream = torch.export.export(module, args, strict=False)
    k_upstream = _topk_sizes(upstream)
    assert len(k_upstream) == 5  # one per class
    # computed from data in the graph: Torch-TensorRT's topk validator wants an int
    assert all(isinstance(k, torch.fx.Node) for k in k_upstream), k_upstream
    with export_patches():
        patched = torch.export.export(module, args, strict=False)
    assert _topk_sizes(patched) == [20]
    nothing_above = (args[0], torch.zeros_like(args[1]), args[2])  # every score 1/6, below 0.3
    for inputs in (args, nothing_above):
        expected = module(*inputs)
        actual = patched.module()(*inputs)
        for want, got in zip(expected, actual, strict=True):
            assert torch.equal(want, got)
    assert len(module(*args)[1]) > 0 and len(module(*nothing_above)[1]) == 0
    assert "postprocess_detections" in vars(SSD)  # restored: torchvision's own again
    assert SSD.postprocess_detections.__module__ == "torchvision.models.detection.ssd"
