"""A partitioned program drawn as strips of blocks in graph order, for any backend that delegates.

Torch-TensorRT puts the operators it supports into TensorRT engines and leaves the rest to PyTorch;
ExecuTorch puts what XNNPACK supports into XNNPACK subgraphs and leaves the rest to its portable
operators. Both partitions are a sequence of segments (`casebook.backends.partition`), and
:func:`draw_partitions` draws any number of them, one strip each, sized for the book's text column.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

from .partition import FAMILIES, KINDS, Segment, shorten

_INK = "#33475b"
# Text sizes (points): at the column width all are at least MIN_FONT_PX on the page.
_TITLE_PT, _LABEL_PT, _BOX_PT, _NOTE_PT = 11.0, 9.0, 9.0, 8.5


def draw_partitions(
    partitions: Mapping[str, Sequence[Segment]],
    *,
    title: str = "",
    notes: bool = True,
    box_width: float = 1.55,
):
    """Draw each partition as a strip of blocks in graph order, labelled by ``partitions``' keys.

    Delegated blocks (TensorRT engines, XNNPACK subgraphs) are drawn in their backend's color with
    their operator count; the blocks left to the host runtime (PyTorch, ExecuTorch's portable
    operators) in orange with their nodes. Where one of several host blocks has too many nodes to name
    in its box, the strip's note names the nodes of each host block of the strip, blocks separated by
    " | ".

    The figure fits the book's text column (`casebook.figures.COLUMN_WIDTH_IN`) with its text at a
    readable size: the strips are stacked, each under its label, and a strip with more blocks than
    fit across the column wraps onto further lines, joined by an arrow that turns down. Every strip
    uses the same box width (at most ``box_width`` inches), so the rows line up block for block.
    """
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
    from matplotlib.path import Path

    from ..figures import _PAD_IN, COLUMN_WIDTH_IN, _text_size_in, _wrap, inch_canvas

    rows = [(label, list(segments)) for label, segments in partitions.items()]
    unknown = sorted({s.kind for _, segments in rows for s in segments} - set(KINDS))
    if unknown:
        raise ValueError(f"segments of unknown kind {unknown}; the kinds drawn are {sorted(KINDS)}")
    present = {s.kind for _, segments in rows for s in segments}
    legend = [kind for family in FAMILIES if present & set(family) for kind in family]
    width_in = COLUMN_WIDTH_IN - 2 * _PAD_IN  # the inline backend pads the saved image by _PAD_IN
    gap, inner_pad, line_gap, strip_gap = 0.3, 0.07, 0.3, 0.3

    # Boxes per line: as many as fit with each box's first line unbroken; one box width for all strips.
    longest = max((len(segments) for _, segments in rows), default=1)
    widest = max((_text_size_in(KINDS[kind].box, _BOX_PT)[0] for kind in legend), default=0.0)
    needed = max(widest + 2 * inner_pad, 1.1)
    per_line = max(1, min(longest, int((width_in + gap) // (needed + gap))))
    box_w = min((width_in - (per_line - 1) * gap) / per_line, max(box_width, needed))
    text_w = box_w - 2 * inner_pad

    def box_lines(segment: Segment) -> tuple[list[str], bool]:
        """The box's wrapped label, and whether it counts the nodes instead of naming them.

        A host block whose names do not fit the box (a long operator name cannot wrap) is counted,
        like one with too many names, and the strip's note names its nodes.
        """
        lines = _wrap(segment.label, _BOX_PT, text_w)
        if KINDS[segment.kind].delegate or segment.abbreviated:
            return lines, segment.abbreviated
        if any(_text_size_in(line, _BOX_PT)[0] > text_w for line in lines):
            return _wrap(segment.counted_label, _BOX_PT, text_w), True
        return lines, False

    fitted = {
        (r, i): box_lines(segment)
        for r, (_, segments) in enumerate(rows)
        for i, segment in enumerate(segments)
    }
    lines_of = {key: lines for key, (lines, _) in fitted.items()}
    counted = {key for key, (_, is_counted) in fitted.items() if is_counted}

    def lines_h(n: int, size: float) -> float:  # matplotlib spaces lines 1.2 line heights apart
        return n * _text_size_in("Ag", size)[1] * 1.2

    box_h = max((lines_h(len(lines), _BOX_PT) for lines in lines_of.values()), default=0.3)
    box_h += 2 * inner_pad

    def wrapped(text: str, size: float, *, monospace: bool = False) -> tuple[str, float]:
        if monospace:  # a monospace character is 0.6 em wide
            lines = textwrap.wrap(text, max(1, int(width_in / (0.6 * size / 72)))) or [""]
        else:
            lines = _wrap(text, size, width_in)
        return "\n".join(lines), lines_h(len(lines), size)

    # Lay out top to bottom, y measured downwards in inches.
    items = []  # (kind, x, y, payload)
    y = 0.05
    if title:
        text, h = wrapped(title, _TITLE_PT)
        items.append(("title", 0.0, y, text))
        y += h + 0.12
    items.append(("legend", 0.0, y, None))
    y += _text_size_in("Ag", _LABEL_PT)[1] + 0.2
    for r, (label, segments) in enumerate(rows):
        text, h = wrapped(label, _LABEL_PT, monospace=True)
        items.append(("label", 0.0, y, text))
        y += h + 0.08
        n_lines = max(1, -(-len(segments) // per_line))
        for i, segment in enumerate(segments):
            line, slot = divmod(i, per_line)
            x = slot * (box_w + gap)
            top = y + line * (box_h + line_gap)
            items.append(("box", x, top, (segment, "\n".join(lines_of[r, i]))))
            if i and slot:  # from the previous box, on the same line
                items.append(("arrow", x, top, [(x - gap, top + box_h / 2), (x, top + box_h / 2)]))
            elif i:  # from the end of the line above: down, back along the gap, down into this box
                prev_x = (per_line - 1) * (box_w + gap) + box_w / 2
                lane = top - line_gap / 2
                points = [(prev_x, top - line_gap), (prev_x, lane), (box_w / 2, lane), (box_w / 2, top)]
                items.append(("arrow", x, top, points))
        y += n_lines * box_h + (n_lines - 1) * line_gap
        host_segments = [s for s in segments if not KINDS[s.kind].delegate]
        if notes and len(host_segments) > 1 and any((r, i) in counted for i in range(len(segments))):
            # A box that only counts its nodes does not say which nodes it holds; with one host
            # block the page's table does, with several the note names them per block.
            per_block = [shorten(list(s.nodes)) for s in host_segments]
            host = KINDS[host_segments[0].kind].box
            text, h = wrapped(f"{host} nodes across these blocks: " + " | ".join(per_block), _NOTE_PT)
            items.append(("note", 0.0, y + 0.08, text))
            y += h + 0.08
        y += strip_gap
    height_in = y - strip_gap + 0.05

    fig, ax = inch_canvas(width_in, height_in)
    for kind, x, y, payload in items:
        if kind == "title":
            ax.text(x, y, payload, ha="left", va="top", fontsize=_TITLE_PT)
        elif kind == "legend":
            swatch = _text_size_in("Ag", _LABEL_PT)[1]
            for color, name in ((KINDS[kind].color, KINDS[kind].legend) for kind in legend):
                ax.add_patch(
                    FancyBboxPatch(
                        (x, y), 1.6 * swatch, swatch, boxstyle="square,pad=0", facecolor=color, alpha=0.85
                    )
                )
                ax.text(
                    x + 1.6 * swatch + 0.08, y + swatch / 2, name, ha="left", va="center", fontsize=_LABEL_PT
                )
                x += 1.6 * swatch + 0.08 + _text_size_in(name, _LABEL_PT)[0] + 0.3
        elif kind == "label":
            ax.text(x, y, payload, ha="left", va="top", fontsize=_LABEL_PT, family="monospace", color=_INK)
        elif kind == "box":
            segment, text = payload
            ax.add_patch(
                FancyBboxPatch(
                    (x, y),
                    box_w,
                    box_h,
                    boxstyle="round,pad=0,rounding_size=0.05",
                    facecolor=KINDS[segment.kind].color,
                    edgecolor=_INK,
                    alpha=0.85,
                )
            )
            ax.text(x + box_w / 2, y + box_h / 2, text, ha="center", va="center", fontsize=_BOX_PT)
        elif kind == "arrow":
            ax.add_patch(
                FancyArrowPatch(
                    path=Path(payload), arrowstyle="-|>", mutation_scale=10, color=_INK, shrinkA=1, shrinkB=1
                )
            )
        else:  # note
            ax.text(x, y, payload, ha="left", va="top", fontsize=_NOTE_PT, color=_INK)
    return fig
