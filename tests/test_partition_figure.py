"""casebook.backends.partition_figure: strips of blocks that fit the column, with notes and a legend."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from casebook.backends.partition import Segment  # noqa: E402
from casebook.backends.partition_figure import draw_partitions  # noqa: E402
from casebook.figures import COLUMN_WIDTH_IN, MIN_FONT_PX, smallest_font_px  # noqa: E402


def test_a_name_too_wide_for_its_box_is_counted_and_named_in_the_note():
    segments = [
        Segment("portable", 0, 16, ("_to_dim_order_copy",) * 16),
        Segment("xnnpack", 1, 253),
        Segment("portable", 2, 3, ("sym_size", "sym_size", "upsample_nearest2d")),
        Segment("xnnpack", 3, 3),
        Segment("portable", 4, 1, ("max_pool2d_with_indices",)),
    ]
    figure = draw_partitions({"backbone": segments}, title="t")
    texts = [t.get_text() for t in figure.axes[0].texts]
    assert "ExecuTorch\n1 node" in texts and "ExecuTorch\n16 nodes" in texts
    note = next(t for t in texts if t.startswith("ExecuTorch nodes across these blocks"))
    assert "max_pool2d_with_indices" in note.replace("\n", " ")
    width, _ = figure.get_size_inches()
    figure.canvas.draw()
    drawn = figure.get_tightbbox(figure.canvas.get_renderer())
    assert width <= COLUMN_WIDTH_IN and drawn.x0 >= -0.01 and drawn.x1 <= width + 0.01
    assert smallest_font_px(figure) >= MIN_FONT_PX


def test_the_legend_shows_each_family_present():
    figure = draw_partitions({"x": [Segment("tensorrt", 0, 5)], "y": [Segment("xnnpack", 0, 3)]})
    texts = {t.get_text() for t in figure.axes[0].texts}
    assert {
        "TensorRT engine",
        "runs in PyTorch",
        "XNNPACK subgraph",
        "ExecuTorch's portable operators",
    } <= texts


def test_an_unknown_kind_of_block_is_refused():
    with pytest.raises(ValueError, match=r"unknown kind \['gpu'\]"):
        draw_partitions({"x": [Segment("gpu", 0, 3)]})
