"""The detectron2 export patches keep eager outputs identical and are undone on exit."""

from __future__ import annotations

import warnings

import pytest
import torch

pytest.importorskip(
    "detectron2",
    reason="detectron2 is not installed (scripts/install_detectron2.sh installs it; `make build` runs it)",
)

import skimage.data  # noqa: E402
import torch.utils._pytree as pytree  # noqa: E402
from detectron2 import model_zoo  # noqa: E402
from detectron2.config import get_cfg  # noqa: E402
from detectron2.layers import mask_ops  # noqa: E402
from detectron2.modeling import build_model, poolers  # noqa: E402
from detectron2.modeling.proposal_generator import proposal_utils, rpn  # noqa: E402
from detectron2.modeling.roi_heads import fast_rcnn  # noqa: E402
from detectron2.structures import Boxes, ImageList, Instances  # noqa: E402

from casebook.patches import detectron2 as d2p  # noqa: E402

warnings.filterwarnings("ignore", category=FutureWarning)  # torch.jit.script deprecation in detectron2


@pytest.fixture(scope="module")
def model():
    cfg = get_cfg()
    cfg.merge_from_file(model_zoo.get_config_file("COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x.yaml"))
    cfg.MODEL.DEVICE = "cpu"
    cfg.MODEL.RPN.PRE_NMS_TOPK_TEST = 300
    cfg.MODEL.RPN.POST_NMS_TOPK_TEST = 50
    cfg.MODEL.ROI_HEADS.SCORE_THRESH_TEST = 0.0  # random weights: keep every detection ...
    cfg.TEST.DETECTIONS_PER_IMAGE = 8  # ... but only the best 8, to keep mask pasting cheap
    torch.manual_seed(0)
    return build_model(cfg).eval()


def _images():
    rgb = torch.as_tensor(skimage.data.chelsea()[..., ::-1].copy()).permute(2, 0, 1).float()  # BGR
    # 136 is padded to 160 (size_divisibility 32), so the ImageList padding path runs
    cat = torch.nn.functional.interpolate(rgb[None], size=(96, 136), mode="bilinear", antialias=True)[0]
    return {
        "cat": cat,
        "blank": torch.zeros(3, 96, 136),
        "nan": torch.full((3, 96, 136), float("nan")),  # every proposal non-finite: the filters' slow path
    }


def _run(model, image):
    with torch.no_grad():
        instances = model([{"image": image}])[0]["instances"]
    return {
        name: value.tensor if isinstance(value, Boxes) else value
        for name, value in instances.get_fields().items()
    }


def _assert_identical(expected, actual):
    assert expected.keys() == actual.keys()
    for name in expected:
        assert expected[name].dtype == actual[name].dtype, name
        assert expected[name].shape == actual[name].shape, name
        assert torch.equal(expected[name], actual[name]), name


@pytest.fixture(scope="module")
def reference(model):
    return {name: _run(model, image) for name, image in _images().items()}


@pytest.mark.slow
def test_reference_has_detections(reference):
    assert reference["cat"]["scores"].numel() > 0  # otherwise the comparisons below prove little


@pytest.mark.slow
@pytest.mark.parametrize("patch", list(d2p.PATCHES))
def test_each_patch_keeps_eager_outputs_identical(model, reference, patch):
    # The finite-filter patches are also exercised on the NaN image; the others on the cat alone.
    names = ("cat", "nan") if "filters" in patch else ("cat",)
    with d2p.export_patches(patch):
        for name in names:
            _assert_identical(reference[name], _run(model, _images()[name]))


@pytest.mark.slow
def test_all_patches_keep_eager_outputs_identical(model, reference):
    with d2p.export_patches():
        for name, image in _images().items():
            _assert_identical(reference[name], _run(model, image))


def _current():
    return {
        "from_tensors": vars(ImageList)["from_tensors"],
        "rpn": rpn.find_top_rpn_proposals,
        "proposal_utils": proposal_utils.find_top_rpn_proposals,
        "boxes_init": Boxes.__init__,
        "boxes_clip": Boxes.clip,
        "nms_pu": proposal_utils.batched_nms,
        "nms_fr": fast_rcnn.batched_nms,
        "set": Instances.set,
        "pooler": poolers.convert_boxes_to_pooler_format,
        "fast_rcnn": fast_rcnn.fast_rcnn_inference_single_image,
        "paste": mask_ops.paste_masks_in_image,
    }


def test_patches_are_restored_on_exit_and_on_error():
    before = _current()
    with d2p.export_patches():
        during = _current()
        assert all(during[key] is not before[key] for key in before)
    assert _current() == before
    with pytest.raises(RuntimeError, match="boom"), d2p.export_patches():
        raise RuntimeError("boom")
    assert _current() == before


def test_nms_fake_override_is_removed_on_exit():
    def nms_output_size():
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        with FakeTensorMode(shape_env=ShapeEnv()) as mode:
            boxes = mode.from_tensor(torch.rand(5, 4))
            scores = mode.from_tensor(torch.rand(5))
            keep = torch.ops.torchvision.nms(boxes, scores, 0.5)
            return mode.shape_env.var_to_range[keep.shape[0].node.expr].lower

    assert nms_output_size() == 2  # torchvision's own fake kernel: at least two boxes
    with d2p.export_patches("nms_fake_allows_empty"):
        assert nms_output_size() == 0
    assert nms_output_size() == 2


def test_skip_switches_need_their_patches_and_reset():
    with (
        pytest.raises(ValueError, match="skip_nms"),
        d2p.export_patches("image_list_int_padding", skip_nms=True),
    ):
        pass
    with d2p.export_patches(skip_nms=True, skip_filter_confidence=True):
        assert d2p._SWITCHES == {"skip_nms": True, "skip_filter_confidence": True}
    assert d2p._SWITCHES == {"skip_nms": False, "skip_filter_confidence": False}


def test_unknown_patch_name():
    with pytest.raises(KeyError, match="unknown patch"), d2p.export_patches("no_such_patch"):
        pass


def test_pytree_registration_round_trip():
    d2p.register_pytree_nodes()
    try:
        instances = Instances((4, 5), pred_boxes=Boxes(torch.rand(3, 4)), scores=torch.rand(3))
        leaves, spec = pytree.tree_flatten([{"instances": instances}])
        assert len(leaves) == 2
        rebuilt = pytree.tree_unflatten(leaves, spec)[0]["instances"]
        assert rebuilt.image_size == (4, 5)
        assert torch.equal(rebuilt.pred_boxes.tensor, instances.pred_boxes.tensor)
        assert torch.equal(rebuilt.scores, instances.scores)
        assert pytree.treespec_loads(pytree.treespec_dumps(spec)) == spec
    finally:
        d2p.unregister_pytree_nodes()
    assert Instances not in pytree.SUPPORTED_NODES and Boxes not in pytree.SUPPORTED_NODES
