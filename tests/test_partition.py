"""casebook.backends.partition: the labels of delegated and host blocks."""

from casebook.backends.partition import Segment, shorten


def test_a_host_block_names_a_repeated_operator_once_with_its_count():
    block = Segment("portable", 0, 19, ("_to_dim_order_copy",) * 18 + ("sym_size",))
    assert shorten(list(block.nodes)) == "_to_dim_order_copy ×18, sym_size"
    assert block.label == "ExecuTorch\n19 nodes"  # too long for the box: counted, named in the note
    assert Segment("portable", 1, 1, ("view_copy",)).label == "ExecuTorch\nview_copy"
    assert Segment("xnnpack", 2, 213).label == "XNNPACK\n213 ops"
