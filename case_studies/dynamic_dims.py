"""Helpers for the static-shapes / dynamic-dims chapter.

Three small pieces of plumbing, so the notebook can stay on the lesson (the export call, the error,
the `dynamic_shapes` spec and the parity proof):

- `mvit_v2_s_for_clip` builds torchvision's MViT-V2-S video classifier for a smaller clip than the
  224x224x16 it is hard-wired to, so export and inference stay fast on a CPU;
- `suggested_fixes` pulls the "Suggested fixes:" block out of a constraint-violation message;
- `user_input_shapes` lists the shapes (with their symbols, `s0`, `4*s1`...) that a program's user
  inputs were traced with.
"""

from __future__ import annotations

from unittest import mock

import torch
import torchvision
import torchvision.models.video.mvit as _mvit_module


def mvit_v2_s_for_clip(
    temporal_size: int = 4, spatial_size: tuple[int, int] = (64, 64), **kwargs
) -> torchvision.models.video.MViT:
    """torchvision's `mvit_v2_s` architecture (random weights) for clips of another size.

    `torchvision.models.video.mvit_v2_s` always builds the model for 16 frames of 224x224 (the
    token grid it reshapes to and its relative position tables are sized for that clip, so other
    clip sizes fail) and does not let `spatial_size` or `temporal_size` through. This builds the very same architecture — same blocks, heads, channels,
    strides — through the same builder, with only the clip size changed. Weights are random
    (`weights=None`); nothing is downloaded. Extra keyword arguments go to `mvit_v2_s`.

    The input is `(batch, 3, temporal_size, *spatial_size)`. Keep the spatial sizes multiples of 32
    and `temporal_size` even, as in the default 16x224x224 clip, so every stage divides evenly.
    """
    real_mvit = _mvit_module.MViT

    def mvit_for_clip(**mvit_kwargs):
        mvit_kwargs.update(spatial_size=tuple(spatial_size), temporal_size=temporal_size)
        return real_mvit(**mvit_kwargs)

    with mock.patch.object(_mvit_module, "MViT", mvit_for_clip):
        return torchvision.models.video.mvit_v2_s(weights=None, **kwargs)


def suggested_fixes(message: str) -> list[str]:
    """The lines of the "Suggested fixes:" block of an export constraint-violation message.

    Export ends such messages with a block of Python-like assignments (`batch = 1`,
    `_h = Dim('_h', min=8, max=128)`, `h = 4*_h`) that, applied to `dynamic_shapes`, make the
    export succeed. Returns `[]` when the message has no such block.
    """
    if "Suggested fixes:" not in message:
        return []
    block = message.split("Suggested fixes:", 1)[1]
    lines = []
    for line in block.splitlines():
        stripped = line.strip()
        if not stripped:
            if lines:
                break
            continue
        if not line.startswith((" ", "\t")):
            break
        lines.append(stripped)
    return lines


def user_input_shapes(program: torch.export.ExportedProgram) -> dict[str, str]:
    """`{placeholder name: traced shape}` for the user inputs of an exported program.

    Shapes are printed as export recorded them, so a dynamic dimension shows up as its symbol
    (`s77`, `4*s16`) and a static one as a number.
    """
    user_inputs = set(program.graph_signature.user_inputs)
    shapes = {}
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name in user_inputs:
            value = node.meta.get("val")
            if isinstance(value, torch.Tensor):
                shapes[node.name] = "[" + ", ".join(str(size) for size in value.shape) + "]"
            else:
                shapes[node.name] = repr(value)
    return shapes
