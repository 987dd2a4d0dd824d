"""Making a random-weight model usable for parity checks (the build machines cannot download weights).

In a randomly initialised network in eval mode, BatchNorm layers normalize with their initial
statistics (mean 0, variance 1), which are far from the statistics of real activations. In a deep
backbone the activations then shrink layer by layer, and a detector's heads give (nearly) the same
score to every box, so a comparison of detections between eager and an exported program would be
trivially true. Re-estimating the statistics on a batch of inputs fixes that.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn


def reestimate_batchnorm(model: nn.Module, batch: torch.Tensor, forward: Callable | None = None) -> int:
    """Replace the running statistics of every BatchNorm layer of `model` by those of `batch`.

    `forward` runs the part of the model that contains the BatchNorm layers on `batch` (default:
    `model` itself; for a torchvision detector pass `model.backbone`, which takes a batched tensor).
    The statistics are a plain average over this one batch (``momentum=None``). The layers are left
    in eval mode. Returns how many layers were re-estimated; raises ValueError when there are none.
    """
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not norms:
        raise ValueError(
            f"{type(model).__name__} has no BatchNorm layer to re-estimate (FrozenBatchNorm2d, used by "
            "detectron2 and some torchvision backbones, has no running statistics to update)"
        )
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # cumulative average over the batch
        norm.train()
    with torch.no_grad():
        (forward or model)(batch)
    for norm in norms:
        norm.eval()
    return len(norms)
