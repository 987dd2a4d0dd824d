"""Diagrams drawn with matplotlib, so the book needs no Graphviz binary to build.

`flow_diagram` draws labelled boxes in columns joined by arrows: compiler pipelines, partitions of a
graph into backend segments. `graph_figure` draws an FX graph as a layered node-link picture.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch


@dataclass(frozen=True)
class Box:
    """One box of a diagram: a title, an optional smaller caption and a fill colour."""

    title: str
    caption: str = ""
    color: str = "#dbe9f6"


def flow_diagram(
    columns: Sequence[Sequence[Box]],
    edges: Sequence[tuple[str, str]],
    *,
    title: str = "",
    column_titles: Sequence[str] = (),
    figsize=(11, 4.2),
):
    """Draw boxes in columns (left to right) and arrows between boxes named by their titles."""
    fig, ax = plt.subplots(figsize=figsize)
    ax.set_axis_off()
    width, height = 0.98, 0.62
    centers = {}
    for col, boxes in enumerate(columns):
        top = (len(boxes) - 1) / 2
        for row, box in enumerate(boxes):
            x, y = col * 1.4, (top - row) * 0.95
            centers[box.title] = (x, y)
            ax.add_patch(
                FancyBboxPatch(
                    (x - width / 2, y - height / 2),
                    width,
                    height,
                    boxstyle="round,pad=0.02",
                    facecolor=box.color,
                    edgecolor="#33475b",
                )
            )
            ax.text(
                x,
                y + (0.1 if box.caption else 0),
                box.title,
                ha="center",
                va="center",
                fontsize=10,
                weight="bold",
            )
            if box.caption:
                ax.text(x, y - 0.14, box.caption, ha="center", va="center", fontsize=7.5, color="#33475b")
    for source, target in edges:
        (x0, y0), (x1, y1) = centers[source], centers[target]
        ax.add_patch(
            FancyArrowPatch(
                (x0 + width / 2, y0),
                (x1 - width / 2, y1),
                arrowstyle="-|>",
                mutation_scale=14,
                color="#33475b",
                shrinkA=2,
                shrinkB=2,
            )
        )
    rows = max(len(c) for c in columns)
    for col, name in enumerate(column_titles):
        ax.text(
            col * 1.4,
            rows * 0.95 / 2 + 0.1,
            name,
            ha="center",
            va="bottom",
            fontsize=11,
            style="italic",
            color="#1f3b57",
        )
    ax.set_xlim(-0.6, (len(columns) - 1) * 1.4 + 0.6)
    ax.set_ylim(-rows * 0.95 / 2 - 0.1, rows * 0.95 / 2 + 0.45)
    if title:
        ax.set_title(title, fontsize=12)
    fig.tight_layout()
    return fig


def graph_figure(graph, *, title: str = "", highlight: dict[str, str] | None = None, figsize=(11, 6)):
    """Draw a torch.fx Graph as layers of nodes (inputs at the top, output at the bottom).

    Each node is placed on the layer of its longest path from an input, so data flows downwards.
    `highlight` maps node names to colours (for example the nodes a pass rewrote).
    """
    highlight = highlight or {}
    nodes = list(graph.nodes)
    depth = {}
    for node in nodes:  # nodes are in topological order
        depth[node] = 1 + max((depth[a] for a in node.all_input_nodes), default=-1)
    layers: dict[int, list] = {}
    for node in nodes:
        layers.setdefault(depth[node], []).append(node)
    position = {}
    for level, members in layers.items():
        for i, node in enumerate(members):
            position[node] = (i - (len(members) - 1) / 2, -level)
    colors = {"placeholder": "#e8f1d8", "call_function": "#dbe9f6", "output": "#f6e0d3", "get_attr": "#eee"}
    fig, ax = plt.subplots(figsize=figsize)
    ax.set_axis_off()
    for node in nodes:
        for user in node.users:
            (x0, y0), (x1, y1) = position[node], position[user]
            ax.annotate(
                "",
                xy=(x1, y1 + 0.18),
                xytext=(x0, y0 - 0.18),
                arrowprops={"arrowstyle": "-|>", "color": "#8795a1", "lw": 0.8},
            )
    for node, (x, y) in position.items():
        label = node.name if node.op != "call_function" else str(node.target).split(".")[-2]
        ax.text(
            x,
            y,
            label,
            ha="center",
            va="center",
            fontsize=8,
            bbox={
                "boxstyle": "round,pad=0.3",
                "facecolor": highlight.get(node.name, colors.get(node.op, "#eee")),
                "edgecolor": "#33475b",
            },
        )
    xs = [p[0] for p in position.values()]
    ax.set_xlim(min(xs) - 0.8, max(xs) + 0.8)
    ax.set_ylim(-max(layers) - 0.6, 0.6)
    if title:
        ax.set_title(title, fontsize=12)
    fig.tight_layout()
    return fig
