"""The diagram helpers draw what they are given, without Graphviz."""

import matplotlib

matplotlib.use("Agg")

import torch  # noqa: E402

from casebook.figures import Box, flow_diagram, graph_figure  # noqa: E402


def test_graph_figure_draws_one_label_per_node():
    program = torch.export.export(
        torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()), (torch.ones(1, 3),)
    )
    figure = graph_figure(program.graph, title="t", highlight={"input": "#ff0000"})
    labels = [t.get_text() for t in figure.axes[0].texts if t.get_text()]  # arrows are empty annotations
    assert len(labels) == len(list(program.graph.nodes))
    assert {"input", "linear", "relu", "output"} <= set(labels)


def test_flow_diagram_connects_boxes_by_title():
    figure = flow_diagram([[Box("a")], [Box("b", "caption")]], [("a", "b")], column_titles=["in", "out"])
    texts = {t.get_text() for t in figure.axes[0].texts}
    assert {"a", "b", "caption", "in", "out"} <= texts
    assert len(figure.axes[0].patches) == 3  # two boxes and one arrow
