"""The diagram helpers draw what they are given, without Graphviz."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402
from matplotlib.path import Path  # noqa: E402

from casebook.figures import (  # noqa: E402
    COLUMN_WIDTH_IN,
    MIN_FONT_PX,
    Box,
    flow_diagram,
    graph_figure,
    smallest_font_px,
)


def test_graph_figure_draws_one_label_per_node():
    program = torch.export.export(
        torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()), (torch.ones(1, 3),)
    )
    figure = graph_figure(program.graph, title="t", highlight={"input": "#ff0000"})
    texts = [t.get_text() for t in figure.axes[0].texts if t.get_text()]  # arrows are empty annotations
    labels = [text for text in texts if text != "t"]
    assert len(labels) == len(list(program.graph.nodes))
    assert {"input", "linear", "relu", "output"} <= set(labels)


def test_flow_diagram_connects_boxes_by_title():
    figure = flow_diagram([[Box("a")], [Box("b", "caption")]], [("a", "b")], column_titles=["in", "out"])
    texts = {t.get_text() for t in figure.axes[0].texts}
    assert {"a", "b", "caption", "in", "out"} <= texts
    assert len(figure.axes[0].patches) == 3  # two boxes and one arrow


# The compilers chapter's pipeline: two frontends, the IR with its passes in one column, three backends.
COMPILERS_COLUMNS = [
    [Box("TorchDynamo", "torch.compile, strict export"), Box("non-strict export", "torch.export default")],
    [Box("Export IR", "FX graph of ATen ops"), Box("passes", "decompose, fuse, quantize")],
    [
        Box("Inductor / AOTInductor", "C++/Triton kernels"),
        Box("TensorRT", "NVIDIA GPU engines"),
        Box("ExecuTorch", "edge devices"),
    ],
]
COMPILERS_EDGES = [
    ("TorchDynamo", "Export IR"),
    ("non-strict export", "Export IR"),
    ("Export IR", "passes"),
    ("passes", "Inductor / AOTInductor"),
    ("passes", "TensorRT"),
    ("passes", "ExecuTorch"),
]
# The Torch-TensorRT chapter's pipeline: eight columns, two of them with two boxes.
PIPELINE_COLUMNS = [
    [Box("ExportedProgram", "from torch.export")],
    [Box("pre-export", "3 passes, e.g.\nremove_detach")],
    [Box("decompose", "Torch-TensorRT's\ndecomposition table")],
    [Box("post-lowering", "16 passes, e.g.\nconstant_fold")],
    [Box("converters", "a converter for\neach node?")],
    [
        Box("TensorRT block", "≥ min_block_size ops"),
        Box("PyTorch block", "no converter, forced\nor too small"),
    ],
    [Box("build engine", "network → engine\nfor this GPU"), Box("stays PyTorch", "FX submodule")],
    [Box("GraphModule", "engines + PyTorch\nsubmodules")],
]
PIPELINE_EDGES = [
    ("ExportedProgram", "pre-export"),
    ("pre-export", "decompose"),
    ("decompose", "post-lowering"),
    ("post-lowering", "converters"),
    ("converters", "TensorRT block"),
    ("converters", "PyTorch block"),
    ("TensorRT block", "build engine"),
    ("PyTorch block", "stays PyTorch"),
    ("build engine", "GraphModule"),
    ("stays PyTorch", "GraphModule"),
]


def _boxes_and_arrows(figure):
    boxes = {p.get_gid(): p for p in figure.axes[0].patches if isinstance(p, FancyBboxPatch)}
    arrows = {p.get_gid(): p for p in figure.axes[0].patches if isinstance(p, FancyArrowPatch)}
    return boxes, arrows


def _inside(box, x, y, margin=0.02):
    return (
        box.get_x() + margin < x < box.get_x() + box.get_width() - margin
        and box.get_y() + margin < y < box.get_y() + box.get_height() - margin
    )


@pytest.mark.parametrize(
    "columns, edges, figsize",
    [(COMPILERS_COLUMNS, COMPILERS_EDGES, None), (PIPELINE_COLUMNS, PIPELINE_EDGES, (16, 4.4))],
    ids=["compilers", "tensorrt-pipeline"],
)
def test_flow_diagram_text_is_readable_at_page_scale(columns, edges, figsize):
    figure = flow_diagram(
        columns, edges, title="a title", column_titles=["input", "", "stage"], figsize=figsize
    )
    assert smallest_font_px(figure) >= MIN_FONT_PX
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    to_data = figure.axes[0].transData.inverted()
    boxes, _ = _boxes_and_arrows(figure)
    for text in figure.axes[0].texts:  # each box's title and caption stay inside the box
        (x0, y0), (x1, y1) = to_data.transform(text.get_window_extent(renderer).get_points())
        holder = [b for b in boxes.values() if _inside(b, (x0 + x1) / 2, (y0 + y1) / 2, margin=0)]
        for box in holder:
            assert box.get_x() <= min(x0, x1) and max(x0, x1) <= box.get_x() + box.get_width(), (
                text.get_text()
            )
            assert box.get_y() <= min(y0, y1) and max(y0, y1) <= box.get_y() + box.get_height(), (
                text.get_text()
            )


@pytest.mark.parametrize(
    "columns, edges", [(COMPILERS_COLUMNS, COMPILERS_EDGES), (PIPELINE_COLUMNS, PIPELINE_EDGES)]
)
def test_flow_diagram_arrows_run_from_source_to_target_without_crossing_boxes(columns, edges):
    figure = flow_diagram(columns, edges)
    boxes, arrows = _boxes_and_arrows(figure)
    assert set(arrows) == {f"{s}->{t}" for s, t in edges}
    for source, target in edges:
        path = arrows[f"{source}->{target}"].get_path()
        for x, y in path.interpolated(50).vertices:  # e.g. "Export IR" -> "passes", once drawn across both
            assert not any(_inside(b, x, y) for b in boxes.values()), (source, target, x, y)
        # The shaft (up to the head's polygon) leaves the source box's border and ends at the target's.
        shaft = path.vertices[: list(path.codes).index(Path.MOVETO, 1)]
        assert _inside(boxes[source], *shaft[0], margin=-0.03), (source, target)
        assert _inside(boxes[target], *shaft[-1], margin=-0.03), (source, target)


def test_flow_diagram_wraps_many_columns_into_bands_that_fit_the_column():
    figure = flow_diagram(PIPELINE_COLUMNS, PIPELINE_EDGES, figsize=(16, 4.4))
    width, _ = figure.get_size_inches()
    assert width <= COLUMN_WIDTH_IN
    boxes, _ = _boxes_and_arrows(figure)
    assert len({round(b.get_y(), 3) for b in boxes.values()}) > 2  # more than one band of rows


def test_flow_diagram_keeps_the_old_call_working():
    figure = flow_diagram(
        [[Box("a", "x")], [Box("b"), Box("c")]],
        [("a", "b"), ("a", "c")],
        column_titles=["in"],
        figsize=(12, 5),
    )
    assert smallest_font_px(figure) >= MIN_FONT_PX


def test_graph_figure_of_fifteen_nodes_is_readable_at_page_scale():
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)
    )
    graph = torch.export.export(model, (torch.ones(1, 4),)).graph
    assert 12 <= len(graph.nodes) <= 16
    figure = graph_figure(graph, title="a title")
    assert smallest_font_px(figure) >= MIN_FONT_PX
    assert figure.get_size_inches()[0] <= COLUMN_WIDTH_IN


def test_graph_figure_spreads_a_wide_layer_over_rows():
    class ManyInputs(torch.nn.Module):
        def forward(self, *xs):
            return torch.stack(xs).sum(0)

    inputs = tuple(torch.ones(2) for _ in range(14))
    figure = graph_figure(torch.export.export(ManyInputs(), inputs).graph)
    assert smallest_font_px(figure) >= MIN_FONT_PX
    assert figure.get_size_inches()[0] <= COLUMN_WIDTH_IN
