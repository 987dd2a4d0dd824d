"""Diagrams drawn with matplotlib, so the book needs no Graphviz binary to build.

`flow_diagram` draws labelled boxes in columns joined by arrows: compiler pipelines, partitions of a
graph into backend segments. `graph_figure` draws an FX graph as a layered node-link picture.

Both are laid out for the page they appear on: the figure is as wide as the book's text column
(`COLUMN_WIDTH_IN` at the inline backend's 100 dpi is `COLUMN_PX` pixels, so the browser shows it
unscaled), a diagram with more columns than fit wraps into several bands, and a graph with more
nodes on one layer than fit spreads that layer over several rows. `smallest_font_px` reports the
size of a figure's smallest text as a reader sees it; the tests keep it at or above `MIN_FONT_PX`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.font_manager import FontProperties
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from matplotlib.path import Path
from matplotlib.text import Text

COLUMN_PX = 780
"""Width of the site's text column in CSS pixels (sphinx-book-theme at a 1400 px window)."""
COLUMN_WIDTH_IN = 7.8
"""Figure width that fills the column at matplotlib's default 100 dpi."""
MIN_FONT_PX = 11.0
"""Smallest text height, in CSS pixels, a reader can comfortably read."""

TITLE_PT, COLUMN_TITLE_PT, BOX_TITLE_PT, CAPTION_PT, NODE_PT = 11.5, 10.0, 9.0, 8.5, 9.0
INK, ARROW_INK = "#33475b", "#5b6b7a"

_PAD_IN = 0.1  # the inline backend saves with bbox_inches="tight" and this padding
_measure = RendererAgg(10, 10, 72)  # at 72 dpi one pixel is one point


def _text_size_in(text: str, size: float, weight: str = "normal") -> tuple[float, float]:
    """Width and height in inches of `text` (possibly several lines) at `size` points."""
    width, height, _ = _measure.get_text_width_height_descent(
        text, FontProperties(size=size, weight=weight), ismath=False
    )
    return width / 72, height / 72


def _wrap(text: str, size: float, max_width_in: float, weight: str = "normal") -> list[str]:
    """Break `text` into lines no wider than `max_width_in` (a single long word stays whole)."""
    lines: list[str] = []
    for paragraph in text.split("\n"):
        line = ""
        for word in paragraph.split():
            candidate = f"{line} {word}" if line else word
            if line and _text_size_in(candidate, size, weight)[0] > max_width_in:
                lines.append(line)
                line = word
            else:
                line = candidate
        lines.append(line)
    return lines


def inch_canvas(width_in: float, height_in: float):
    """A figure whose one axes spans it in inches, y growing downwards: layouts are computed in
    inches from the top, so they are drawn with those coordinates as they are."""
    fig = plt.figure(figsize=(width_in, height_in))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.set_xlim(0, width_in)
    ax.set_ylim(height_in, 0)
    return fig, ax


def smallest_font_px(fig, column_px: float = COLUMN_PX) -> float:
    """Height in CSS px of the figure's smallest text once the page shows it.

    The inline backend saves the figure at `fig.dpi` with a tight bounding box; the theme scales an
    image wider than the text column down to `column_px` and shows a narrower one unscaled.
    """
    fig.canvas.draw()
    bbox = fig.get_tightbbox(fig.canvas.get_renderer())
    width_px = (bbox.width + 2 * _PAD_IN) * fig.dpi
    scale = min(1.0, column_px / width_px)
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return min(sizes) * fig.dpi / 72 * scale


@dataclass(frozen=True)
class Box:
    """One box of a diagram: a title, an optional smaller caption and a fill colour."""

    title: str
    caption: str = ""
    color: str = "#dbe9f6"


def _split_into_bands(columns, edges, per_band: int) -> list[range]:
    """Cut the columns into consecutive bands of at most `per_band`, as few bands as possible.

    Among the cuts with that many bands, prefer the one with the fewest edges crossing from one band
    to the next (each becomes a connector that turns a corner; one that leaves a box other than the
    bottom one of its column, or enters one other than the top one, counts ten), then the most even
    band widths.
    """
    n = len(columns)
    bands = math.ceil(n / per_band)
    column_of = {box.title: c for c, boxes in enumerate(columns) for box in boxes}
    cost = {
        (s, t): 1 if columns[column_of[s]][-1].title == s and columns[column_of[t]][0].title == t else 10
        for s, t in edges
    }
    best = None
    for cuts in itertools.combinations(range(1, n), bands - 1):
        bounds = (0, *cuts, n)
        sizes = [b - a for a, b in itertools.pairwise(bounds)]
        if max(sizes) > per_band:
            continue
        band_of = [i for i, size in enumerate(sizes) for _ in range(size)]
        crossing = sum(cost[s, t] for s, t in edges if band_of[column_of[s]] != band_of[column_of[t]])
        key = (crossing, max(sizes) - min(sizes), [-s for s in sizes])
        if best is None or key < best[0]:
            best = (key, bounds)
    bounds = best[1]
    return [range(a, b) for a, b in itertools.pairwise(bounds)]


def flow_diagram(
    columns: Sequence[Sequence[Box]],
    edges: Sequence[tuple[str, str]],
    *,
    title: str = "",
    column_titles: Sequence[str] = (),
    figsize=None,
    max_columns: int | None = None,
):
    """Draw boxes in columns (left to right) and arrows between boxes named by their titles.

    The figure is as wide as the text column; when the columns do not fit side by side at a readable
    size they wrap into bands read top to bottom, and an edge from one band to the next turns down
    through the gap between them. An edge between boxes of the same column is drawn vertically.
    `max_columns` caps the columns per band. `figsize` is accepted for compatibility: its width, if
    narrower than the column, limits the figure's width; the height always follows the layout.
    """
    width_in = (min(figsize[0], COLUMN_WIDTH_IN) if figsize else COLUMN_WIDTH_IN) - 2 * _PAD_IN
    gap, vgap, band_gap, margin = 0.4, 0.28, 0.5, 0.03
    inner_pad, line_gap = 0.08, 0.06
    boxes = [box for column in columns for box in column]
    column_titles = list(column_titles) + [""] * (len(columns) - len(column_titles))

    # Columns per band: as many as fit with every box title on one line.
    needed = max(_text_size_in(b.title, BOX_TITLE_PT, "bold")[0] for b in boxes) + 2 * inner_pad
    needed = max(needed, 1.1)
    per_band = max(1, int((width_in - 2 * margin + gap) // (needed + gap)))
    per_band = min(per_band, len(columns), max_columns or len(columns))
    bands = _split_into_bands(columns, edges, per_band)
    box_w = min((width_in - 2 * margin - (per_band - 1) * gap) / per_band, 2.2)
    width_in = min(width_in, 2 * margin + per_band * box_w + (per_band - 1) * gap)

    # Text of each box, wrapped to the box, and one box height for the whole figure.
    lines = {
        b.title: (
            _wrap(b.title, BOX_TITLE_PT, box_w - 2 * inner_pad, "bold"),
            _wrap(b.caption, CAPTION_PT, box_w - 2 * inner_pad) if b.caption else [],
        )
        for b in boxes
    }
    title_lh = _text_size_in("Ag", BOX_TITLE_PT, "bold")[1] * 1.2
    caption_lh = _text_size_in("Ag", CAPTION_PT)[1] * 1.2
    box_h = max(
        2 * inner_pad + len(t) * title_lh + (line_gap + len(c) * caption_lh if c else 0)
        for t, c in lines.values()
    )
    column_title_h = _text_size_in("Ag", COLUMN_TITLE_PT)[1] + 0.12
    figure_title_h = _text_size_in("Ag", TITLE_PT)[1] + 0.2 if title else 0.0

    # Place the boxes, measuring y downwards from the top of the figure.
    top, center, band_of_column, band_bottoms = figure_title_h, {}, {}, []
    for band_index, band in enumerate(bands):
        if any(column_titles[c] for c in band):
            for slot, c in enumerate(band):
                x = margin + slot * (box_w + gap) + box_w / 2
                center[("column title", c)] = (x, top + column_title_h / 2)
            top += column_title_h
        rows = max(len(columns[c]) for c in band)
        band_h = rows * box_h + (rows - 1) * vgap
        for slot, c in enumerate(band):
            band_of_column[c] = band_index
            x = margin + slot * (box_w + gap) + box_w / 2
            first = top + (band_h - (len(columns[c]) * box_h + (len(columns[c]) - 1) * vgap)) / 2
            for row, box in enumerate(columns[c]):
                center[box.title] = (x, first + row * (box_h + vgap) + box_h / 2)
        top += band_h
        band_bottoms.append(top)
        top += band_gap
    height_in = top - band_gap + 0.05

    fig, ax = inch_canvas(width_in, height_in)

    if title:
        ax.text(width_in / 2, 0.05, title, ha="center", va="top", fontsize=TITLE_PT)
    for c, name in enumerate(column_titles):
        if name and ("column title", c) in center:
            x, y = center[("column title", c)]
            ax.text(
                x,
                y,
                name,
                ha="center",
                va="center",
                fontsize=COLUMN_TITLE_PT,
                style="italic",
                color="#1f3b57",
            )
    for box in boxes:
        x, y = center[box.title]
        patch = FancyBboxPatch(
            (x - box_w / 2, y - box_h / 2),
            box_w,
            box_h,
            boxstyle="round,pad=0,rounding_size=0.06",
            facecolor=box.color,
            edgecolor=INK,
            gid=box.title,
        )
        ax.add_patch(patch)
        title_lines, caption_lines = lines[box.title]
        text_h = len(title_lines) * title_lh + (
            line_gap + len(caption_lines) * caption_lh if caption_lines else 0
        )
        y_text = y - text_h / 2
        ax.text(
            x, y_text, "\n".join(title_lines), ha="center", va="top", fontsize=BOX_TITLE_PT, weight="bold"
        )
        if caption_lines:
            ax.text(
                x,
                y_text + len(title_lines) * title_lh + line_gap,
                "\n".join(caption_lines),
                ha="center",
                va="top",
                fontsize=CAPTION_PT,
                color=INK,
                linespacing=1.2,
            )

    column_of = {box.title: c for c, column in enumerate(columns) for box in column}
    for source, target in edges:
        (x0, y0), (x1, y1) = center[source], center[target]
        c0, c1 = column_of[source], column_of[target]
        b0, b1 = band_of_column[c0], band_of_column[c1]
        hw, hh = box_w / 2, box_h / 2
        if b0 != b1:
            # Down out of the source, along the gap below its band, down into the target.
            lane = band_bottoms[b0] + band_gap / 2 if b1 > b0 else band_bottoms[b1] + band_gap / 2
            # A box with another below (above) it is left (entered) from the side, through the
            # gap between columns: the right-hand gap if there is one, else the left-hand gap.
            side0 = 1 if x0 + hw + gap / 2 < width_in else -1
            side1 = -1 if x1 - hw - gap / 2 > 0 else 1
            if columns[c0][-1].title == source:
                start = [(x0, y0 + hh)]
            else:
                start = [(x0 + side0 * hw, y0), (x0 + side0 * (hw + gap / 2), y0)]
            if columns[c1][0].title == target:
                end = [(x1, y1 - hh)]
            else:
                end = [(x1 + side1 * (hw + gap / 2), y1), (x1 + side1 * hw, y1)]
            points = [*start, (start[-1][0], lane), (end[0][0], lane), *end]
        elif c0 == c1:
            sign = 1 if y1 > y0 else -1
            points = [(x0, y0 + sign * hh), (x1, y1 - sign * hh)]
        elif c1 > c0:
            points = [(x0 + hw, y0), (x1 - hw, y1)]
        else:
            points = [(x0 - hw, y0), (x1 + hw, y1)]
        ax.add_patch(
            FancyArrowPatch(
                path=Path(points),
                arrowstyle="-|>",
                mutation_scale=13,
                color=INK,
                linewidth=1.1,
                gid=f"{source}->{target}",
            )
        )
    return fig


def graph_figure(graph, *, title: str = "", highlight: dict[str, str] | None = None, figsize=None):
    """Draw a torch.fx Graph as layers of nodes, data flowing downwards to the output at the bottom.

    Each operator is placed on the layer of its longest path from an input; each input (parameter,
    buffer, user input) sits beside the operators one layer above the first operator that reads it,
    so its arrow is short and crosses no other node. A layer with more nodes than fit across the
    text column is spread over several rows. `highlight` maps node names to colours (for example the
    nodes a pass rewrote). `figsize` is accepted for compatibility: its width, if narrower than the
    column, limits the figure's width; the height always follows the layout.
    """
    highlight = highlight or {}
    width_in = min(figsize[0], COLUMN_WIDTH_IN) if figsize else COLUMN_WIDTH_IN
    width_in -= 2 * _PAD_IN
    nodes = list(graph.nodes)
    sources = {n for n in nodes if not n.all_input_nodes and n.op in ("placeholder", "get_attr")}
    depth = {}
    for node in nodes:  # nodes are in topological order
        depth[node] = 1 + max((depth[a] for a in node.all_input_nodes), default=-1)
    for node in sources:
        if node.users:
            depth[node] = max(0, min(depth[u] for u in node.users) - 1)
    layers: dict[int, list] = {}
    for node in nodes:
        layers.setdefault(depth[node], []).append(node)

    def label(node) -> str:
        return node.name if node.op != "call_function" else str(node.target).split(".")[-2]

    label_pad, spacing, row_pitch = 0.08, 0.22, 0.5
    node_w = {n: _text_size_in(label(n), NODE_PT)[0] + 2 * label_pad for n in nodes}

    def row_width(row) -> float:
        return sum(node_w[n] for n in row) + spacing * (len(row) - 1)

    rows: list[list] = []
    for level in sorted(layers):
        # Operators in the middle, inputs alternately to their left and right.
        operators = [n for n in layers[level] if n not in sources]
        inputs = [n for n in layers[level] if n in sources]
        left, right = inputs[1::2][::-1], inputs[0::2]
        members = left + operators + right
        count = 1
        while (
            count < len(members)
            and max(
                row_width(members[i : i + math.ceil(len(members) / count)])
                for i in range(0, len(members), math.ceil(len(members) / count))
            )
            > width_in
        ):
            count += 1
        if count > 1:  # several rows: keep the graph's order, easier to read than alternating sides
            members = layers[level]
        size = math.ceil(len(members) / count)
        rows += [members[i : i + size] for i in range(0, len(members), size)]

    figure_title_h = _text_size_in("Ag", TITLE_PT)[1] + 0.25 if title else 0.05
    node_h = _text_size_in("Ag", NODE_PT)[1] + 2 * label_pad
    position = {}
    for index, row in enumerate(rows):
        y = figure_title_h + node_h / 2 + index * row_pitch
        operators = [n for n in row if n not in sources] or row
        # Centre the row's operators on the column's axis, so a chain of operators stays straight.
        start = (
            width_in / 2
            - row_width(operators) / 2
            - sum(node_w[n] + spacing for n in row[: row.index(operators[0])])
        )
        start = min(max(start, 0.0), width_in - row_width(row)) if row_width(row) <= width_in else 0.0
        x = start
        for node in row:
            position[node] = (x + node_w[node] / 2, y)
            x += node_w[node] + spacing
    height_in = figure_title_h + (len(rows) - 1) * row_pitch + node_h + 0.05
    right_edge = max(width_in, max(x + node_w[n] / 2 for n, (x, _) in position.items()))

    colors = {"placeholder": "#e8f1d8", "call_function": "#dbe9f6", "output": "#f6e0d3", "get_attr": "#eee"}
    fig = plt.figure(figsize=(right_edge, height_in))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.set_xlim(0, right_edge)
    ax.set_ylim(height_in, 0)
    for node in nodes:
        for user in node.users:
            (x0, y0), (x1, y1) = position[node], position[user]
            if y0 == y1:  # an input beside its reader's row: leave from its side
                start = (x0 + (node_w[node] if x1 > x0 else -node_w[node]) / 2, y0)
            else:
                start = (x0, y0 + node_h / 2)
            ax.annotate(
                "",
                xy=(x1, y1 - node_h / 2),
                xytext=start,
                arrowprops={"arrowstyle": "-|>", "color": ARROW_INK, "lw": 0.9, "shrinkA": 1, "shrinkB": 1},
            )
    for node, (x, y) in position.items():
        ax.text(
            x,
            y,
            label(node),
            ha="center",
            va="center",
            fontsize=NODE_PT,
            bbox={
                "boxstyle": f"round,pad={label_pad * 72 / NODE_PT:.2f}",
                "facecolor": highlight.get(node.name, colors.get(node.op, "#eee")),
                "edgecolor": INK,
            },
        )
    if title:
        ax.text(right_edge / 2, 0.05, title, ha="center", va="top", fontsize=TITLE_PT)
    return fig
