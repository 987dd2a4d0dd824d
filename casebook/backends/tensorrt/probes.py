"""Probes a page runs inside the build worker (``before_load``) to show what Torch-TensorRT hides.

Each one changes the worker's Torch-TensorRT for one build only (a build with ``before_load`` gets a
worker of its own), to test a sentence about it, never to make a build pass.
"""

from __future__ import annotations


def lift_the_rtx_switch() -> None:
    """Let converters marked ``@needs_not_tensorrt_rtx`` run under TensorRT for RTX.

    The decorator (``torch_tensorrt/_features.py``) reads ``ENABLED_FEATURES.tensorrt_rtx`` from its own
    module each time a converter is called and raises ``NotImplementedError`` when it is set. Setting it
    to False there, and only there, runs the converter's own code, so the TensorRT builder, not the
    decorator, says whether it can build the layer. Other modules keep their own reference to the
    original flags.
    """
    import torch_tensorrt._features as features

    features.ENABLED_FEATURES = features.ENABLED_FEATURES._replace(tensorrt_rtx=False)
