"""casebook.models.stand_ins: the detectron2-like Boxes/Instances and their pytree registration."""

import json

import pytest
import torch
import torch.utils._pytree as pytree

from casebook.models import stand_ins as structures
from casebook.models.stand_ins import Boxes, Instances


@pytest.fixture
def registry():
    """Start unregistered; leave the registry as the test found it."""
    was_registered = structures.is_registered(Instances)
    structures.unregister_pytree_nodes()
    yield
    structures.unregister_pytree_nodes()
    if was_registered:
        structures.register_pytree_nodes()


def make_instances(n: int = 3) -> Instances:
    boxes = torch.arange(n * 4, dtype=torch.float32).reshape(n, 4)
    return Instances(
        (32, 48), pred_boxes=Boxes(boxes), scores=torch.linspace(0, 1, n), pred_classes=torch.arange(n)
    )


def test_boxes_interface():
    boxes = Boxes(torch.tensor([[0.0, 0.0, 2.0, 3.0], [1.0, 1.0, 2.0, 2.0]]))
    assert len(boxes) == 2
    torch.testing.assert_close(boxes.area(), torch.tensor([6.0, 1.0]))
    assert len(boxes[0]) == 1 and boxes[0].tensor.shape == (1, 4)
    assert len(boxes[torch.tensor([False, True])]) == 1
    assert len(Boxes(torch.zeros(0, 4))) == 0
    with pytest.raises(ValueError, match="Boxes needs an"):
        Boxes(torch.zeros(3))


def test_instances_interface():
    instances = make_instances(3)
    assert len(instances) == 3 and instances.image_size == (32, 48)
    assert instances.has("scores") and not instances.has("masks")
    assert instances.get("scores") is instances.scores
    assert list(instances.get_fields()) == ["pred_boxes", "scores", "pred_classes"]
    subset = instances[instances.scores > 0.4]
    assert len(subset) == 2 and isinstance(subset.pred_boxes, Boxes)
    assert len(instances[0]) == 1
    instances.labels = torch.zeros(3)
    assert instances.has("labels")
    instances.remove("labels")
    assert not instances.has("labels")
    with pytest.raises(ValueError, match="length 2"):
        instances.set("bad", torch.zeros(2))
    with pytest.raises(AttributeError, match="Cannot find field"):
        instances.masks  # noqa: B018
    with pytest.raises(NotImplementedError):
        len(Instances((1, 1)))
    assert "num_instances=3" in repr(instances)


def test_unregistered_instances_are_a_single_leaf(registry):
    leaves, _ = pytree.tree_flatten(make_instances())
    assert len(leaves) == 1 and isinstance(leaves[0], Instances)


def test_register_is_idempotent_and_flattens_with_paths(registry):
    structures.register_pytree_nodes()
    structures.register_pytree_nodes()
    instances = make_instances()
    leaves_with_paths, spec = pytree.tree_flatten_with_path(instances)
    assert [pytree.keystr(path) for path, _ in leaves_with_paths] == [
        ".pred_boxes.tensor",
        ".scores",
        ".pred_classes",
    ]
    rebuilt = pytree.tree_unflatten([leaf for _, leaf in leaves_with_paths], spec)
    assert isinstance(rebuilt, Instances) and rebuilt.image_size == (32, 48)
    assert rebuilt.pred_boxes.tensor is instances.pred_boxes.tensor


def test_unregister_removes_both_and_tolerates_unnamed_registrations(registry):
    pytree.register_pytree_node(Boxes, structures.boxes_flatten, structures.boxes_unflatten)
    pytree.register_pytree_node(Instances, structures.instances_flatten, structures.instances_unflatten)
    structures.unregister_pytree_nodes()
    assert not structures.is_registered(Boxes) and not structures.is_registered(Instances)
    structures.unregister_pytree_nodes()  # nothing left to do


def test_context_survives_json():
    context = ((32, 48), ("pred_boxes", "scores"))
    data = json.loads(json.dumps(structures.instances_context_to_json(context)))
    assert structures.instances_context_from_json(data) == context


def test_treespec_round_trips_through_json(registry):
    structures.register_pytree_nodes()
    _, spec = pytree.tree_flatten(make_instances())
    assert pytree.treespec_loads(pytree.treespec_dumps(spec)) == spec


@pytest.mark.slow
def test_exported_program_saves_and_loads(registry, tmp_path):
    class Detect(torch.nn.Module):
        def forward(self, scores):
            keep = scores > 0.5
            boxes = torch.stack([scores, scores, scores + 1, scores + 1], dim=1)
            return Instances((8, 8), pred_boxes=Boxes(boxes[keep]), scores=scores[keep])

    structures.register_pytree_nodes()
    scores = torch.tensor([0.1, 0.7, 0.9])
    program = torch.export.export(Detect(), (scores,))
    torch.export.save(program, tmp_path / "detect.pt2")
    loaded = torch.export.load(tmp_path / "detect.pt2").module()
    for example in (scores, torch.zeros(3)):
        got, want = loaded(example), Detect()(example)
        assert pytree.tree_structure(got) == pytree.tree_structure(want)
        torch.testing.assert_close(got.pred_boxes.tensor, want.pred_boxes.tensor)
