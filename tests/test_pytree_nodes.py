"""casebook.pytree_nodes: the one registration helper used for the stand-ins and for detectron2."""

import torch
import torch.utils._pytree as pytree

from casebook.pytree_nodes import is_registered, register_node, unregister_nodes


class Pair:
    def __init__(self, first, second):
        self.first, self.second = first, second


def flatten(pair):
    return [pair.first, pair.second], None


def flatten_with_keys(pair):
    return [(pytree.GetAttrKey("first"), pair.first), (pytree.GetAttrKey("second"), pair.second)], None


def unflatten(children, context):
    return Pair(*children)


def register():
    register_node(
        Pair, flatten, unflatten, serialized_type_name="tests.Pair", flatten_with_keys=flatten_with_keys
    )


def test_register_is_idempotent_and_unregister_cleans_every_table():
    register()
    register()  # a second registration is a no-op, not pytree's "already registered" error
    try:
        assert is_registered(Pair)
        leaves, spec = pytree.tree_flatten(Pair(torch.ones(1), torch.zeros(1)))
        assert len(leaves) == 2
        assert pytree.treespec_loads(pytree.treespec_dumps(spec)) == spec
    finally:
        unregister_nodes(Pair)
    assert not is_registered(Pair)
    assert "tests.Pair" not in pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE
    assert pytree.treespec_loads.cache_info().currsize == 0  # no cached spec still names Pair
    unregister_nodes(Pair)  # unregistering an unregistered class is a no-op


def test_detectron2_and_stand_ins_share_the_helper():
    from casebook.models import stand_ins
    from casebook.patches import detectron2

    assert stand_ins.register_node is register_node
    assert detectron2.unregister_nodes is unregister_nodes
