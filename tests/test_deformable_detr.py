"""The Deformable-DETR case-study model: its forms agree in eager, and its export-friendly form exports."""

import pytest
import torch
from torch.export import Dim
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from casebook.models.deformable_detr import DeformableDETR, get_reference_points, make_spatial_shapes
from casebook.models.stand_ins import Boxes, Instances, register_pytree_nodes
from casebook.parity import assert_parity

FORMS = [("tensor", "linspace"), ("tensor", "arange"), ("list", "linspace"), ("list", "arange")]


@pytest.fixture
def registered():
    """Boxes and Instances as pytree nodes, so parity checks (and export) can look inside them."""
    register_pytree_nodes()


@pytest.fixture(scope="module")
def weights():
    torch.manual_seed(0)
    return DeformableDETR().eval().state_dict()


def build(weights, shapes_as, reference_points, **kwargs):
    model = DeformableDETR(shapes_as=shapes_as, reference_points=reference_points, **kwargs).eval()
    model.load_state_dict(weights)
    return model


def images(*sizes):
    generator = torch.Generator().manual_seed(1)
    return [torch.rand(3, h, w, generator=generator) for h, w in sizes]


def test_reference_points_agree_and_lie_inside_the_unit_square():
    features = [torch.zeros(1, 4, 6, 10), torch.zeros(1, 4, 3, 5)]
    expected = None
    for shapes_as in ("tensor", "list"):
        for method in ("linspace", "arange"):
            points = get_reference_points(
                make_spatial_shapes(features, shapes_as), torch.device("cpu"), method
            )
            assert points.shape == (1, 6 * 10 + 3 * 5, 2)
            assert 0 < points.min() and points.max() < 1
            if expected is None:
                expected = points
            torch.testing.assert_close(points, expected, rtol=0, atol=0)


@pytest.mark.slow
def test_all_forms_give_identical_outputs_in_eager(weights, registered):
    reference = build(weights, "tensor", "linspace")
    inputs = [([{"image": image, "height": 480, "width": 640}],) for image in images((128, 128), (96, 160))]
    for shapes_as, reference_points in FORMS[1:]:
        assert_parity(reference, build(weights, shapes_as, reference_points), inputs, rtol=0, atol=0)


def test_output_is_detectron2_style_instances_scaled_to_the_requested_size(weights):
    model = build(weights, "list", "arange", score_threshold=0.0)
    image = images((128, 96))[0]
    with torch.no_grad():
        (small,) = model([{"image": image, "height": 300, "width": 200}])
        (large,) = model([{"image": image, "height": 600, "width": 400}])
    instances = small["instances"]
    assert isinstance(instances, Instances) and isinstance(instances.pred_boxes, Boxes)
    assert instances.image_size == (300, 200)
    assert len(instances) == model.top_k  # a threshold of 0 keeps every top-k candidate
    torch.testing.assert_close(large["instances"].pred_boxes.tensor, 2 * instances.pred_boxes.tensor)


@pytest.mark.slow
def test_tensor_spatial_shapes_with_linspace_fail_to_export(weights):
    model = build(weights, "tensor", "linspace")
    with pytest.raises(GuardOnDataDependentSymNode, match="data-dependent expression"):
        torch.export.export(model, ([{"image": images((128, 128))[0]}],))


@pytest.mark.slow
def test_dynamic_export_of_list_and_arange_form_matches_eager_at_new_sizes(weights, registered):
    model = build(weights, "list", "arange")
    height, width = Dim("H", min=64, max=512), Dim("W", min=64, max=512)
    example = ([{"image": images((128, 128))[0], "height": 480, "width": 640}],)
    dynamic = ([{"image": {1: height, 2: width}, "height": None, "width": None}],)
    program = torch.export.export(model, example, dynamic_shapes=dynamic)
    new_sizes = [([{"image": image, "height": 480, "width": 640}],) for image in images((96, 160), (64, 64))]
    assert_parity(model, program.module(), new_sizes)


@pytest.mark.slow
def test_attention_as_a_custom_operator_agrees_with_the_inline_fallback(weights, registered):
    reference = build(weights, "tensor", "linspace")
    inputs = [([{"image": image, "height": 480, "width": 640}],) for image in images((128, 128), (96, 160))]
    for shapes_as in ("tensor", "list"):
        assert_parity(
            reference, build(weights, shapes_as, "linspace", attention="custom_op"), inputs, rtol=0, atol=0
        )


@pytest.mark.slow
def test_dynamic_export_with_the_attention_operator_keeps_one_call_per_layer(weights, registered):
    model = build(weights, "list", "arange", attention="custom_op")
    height, width = Dim("H", min=64, max=512), Dim("W", min=64, max=512)
    example = ([{"image": images((128, 128))[0], "height": 480, "width": 640}],)
    dynamic = ([{"image": {1: height, 2: width}, "height": None, "width": None}],)
    program = torch.export.export(model, example, dynamic_shapes=dynamic)
    calls = [n for n in program.graph.nodes if str(n.target) == "casebook.ms_deform_attn.default"]
    assert len(calls) == 3  # one encoder layer, two decoder layers
    assert not [n for n in program.graph.nodes if "grid_sampler" in str(n.target)]
    new_sizes = [([{"image": image, "height": 480, "width": 640}],) for image in images((96, 160), (64, 64))]
    assert_parity(model, program.module(), new_sizes)
