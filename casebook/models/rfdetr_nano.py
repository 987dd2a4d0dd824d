"""RF-DETR nano from its own package (``rfdetr==1.11.2``), offline, with random weights.

``RFDETRNano(pretrain_weights=None)`` builds the network from the package's config: a windowed
DINOv2-small backbone with patch size 16 and 2 x 2 windows (so heights and widths are multiples of
32), a two-layer deformable decoder, 300 queries, 384 x 384 pixels by default. Without
``pretrain_weights`` nothing is downloaded; ``HF_HUB_OFFLINE`` keeps the Hugging Face libraries it
imports from looking anything up. The torch module is ``RFDETRNano(...).model.model`` (an
``LWDETR``); its ``forward`` takes a batch of normalized images and returns a dict of
``pred_logits`` (batch, 300, 91) and ``pred_boxes`` (batch, 300, 4, normalized cx, cy, w, h).
"""

from __future__ import annotations

import logging
import os
import warnings

import torch
from torch import nn

from .images import CALIBRATION_PHOTOS, load_image

RESOLUTION = 384
"""The nano model's default input size (pixels a side), the size its position embeddings are for."""

SIZE_MULTIPLE = 32
"""Heights and widths must be multiples of patch size x windows (16 x 2): the package checks it."""

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def rfdetr_nano(seed: int = 0) -> nn.Module:
    """RF-DETR nano's ``LWDETR`` with random weights drawn after ``torch.manual_seed(seed)``, in eval mode.

    The package logs two warnings on construction (its backbone's patch size and position grid differ
    from DINOv2's, so DINOv2 weights would not load: none are loaded here anyway) and pydantic one;
    they are kept off the page.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from rfdetr import RFDETRNano  # its logger is set up at import, so its level is set after

        rfdetr_logger = logging.getLogger("rf-detr")
        level = rfdetr_logger.level
        rfdetr_logger.setLevel(logging.ERROR)
        try:
            torch.manual_seed(seed)
            model = RFDETRNano(pretrain_weights=None).model.model
        finally:
            rfdetr_logger.setLevel(level)
    return model.eval()


def photos(size: int | tuple[int, int], names: tuple[str, ...] = CALIBRATION_PHOTOS) -> torch.Tensor:
    """A batch of the book's photos at ``size`` (an int: square; else (height, width)), normalized
    with ImageNet's mean and standard deviation, as RF-DETR's predictor does before the network."""
    batch = torch.stack([load_image(name, size) for name in names])
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    return (batch - mean) / std


def flat_outputs(outputs) -> torch.Tensor:
    """A module's outputs as one flat tensor: a tensor as it is, RF-DETR's dict as its
    ``pred_logits`` and ``pred_boxes`` (the two outputs a deployment reads), a tuple concatenated."""
    if isinstance(outputs, torch.Tensor):
        return outputs.flatten()
    if isinstance(outputs, dict):
        outputs = (outputs["pred_logits"], outputs["pred_boxes"])
    return torch.cat([output.flatten() for output in outputs])


def try_sizes(
    program: torch.export.ExportedProgram, model: nn.Module, sizes, channels: int = 3
) -> list[dict]:
    """Run ``program`` and the eager ``model`` on a random batch at each (batch, height, width) of
    ``sizes``: one row each, with the largest difference where the program ran and the first line of
    its refusal where it did not (an exported program checks its input's sizes before it runs)."""
    rows = []
    generator = torch.Generator().manual_seed(0)
    run_program = program.module()  # unlifted once, not once per size
    for batch, height, width in sizes:
        images = torch.rand(batch, channels, height, width, generator=generator)
        row = {"input": f"{batch} x {channels} x {height} x {width}"}
        with torch.no_grad():
            expected = flat_outputs(model(images))
            try:
                got = flat_outputs(run_program(images))
            except AssertionError as refusal:  # the program's own input check: the row says which
                row.update(runs=False, **{"max |diff|": None, "refusal": str(refusal).splitlines()[0]})
            else:
                row.update(runs=True, **{"max |diff|": (got - expected).abs().max().item(), "refusal": ""})
        rows.append(row)
    return rows
