"""Export-safe versions of two RF-DETR functions (``rfdetr==1.11.2``), applied temporarily.

RF-DETR exports statically as shipped. With a dynamic height and width it meets, in this order:

=====  ==============================  ===========================================================
 #     patch                           what export says without it
=====  ==============================  ===========================================================
 1     ``position_cache_skipped``      ``TypeError: unhashable type: non-nested SymInt``: the sine
                                       position encoding keys a cache by ``tuple(mask.shape)``
 2     ``pos_encoding_symbolic_size``  (no error: the program's range says 128 to 1280 pixels, and
                                       it accepts only the example's size: DINOv2's position
                                       embedding turns the patch grid into Python ints)
=====  ==============================  ===========================================================

Both keep eager outputs identical: each replacement runs the package's own code unless
``torch.compiler.is_compiling()``, that is, unless export (or ``torch.compile``) is tracing it.
Nothing in site-packages is edited; :func:`export_patches` restores the originals on exit.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn

from .core import Patch, apply, check_names, replace
from .core import patch_table as _patch_table


def _rfdetr_modules():
    """The two RF-DETR modules the patches change (imported late: rfdetr is heavy to import)."""
    from rfdetr.models import position_encoding
    from rfdetr.models.backbone import dinov2_with_windowed_attn

    return position_encoding, dinov2_with_windowed_attn


def position_embedding_forward(self, tensor_list, align_dim_orders: bool = True) -> Tensor:
    """``PositionEmbeddingSine.forward`` without its cache while tracing.

    The cache is keyed by ``tuple(mask.shape)``; under export with a dynamic height or width those
    sizes are SymInts, which cannot be hashed. The cached tensor is ``_compute`` of the same input,
    so computing it is what eager returns, minus the reuse.
    """
    if torch.compiler.is_compiling():  # export-safe: no cache lookup on symbolic sizes
        return self._compute(tensor_list, align_dim_orders)  # export-safe
    return _ORIGINALS["position_embedding_forward"](self, tensor_list, align_dim_orders)


def interpolate_pos_encoding(self, embeddings: Tensor, height: int, width: int) -> Tensor:
    """``WindowedDinov2WithRegistersEmbeddings.interpolate_pos_encoding`` with the patch grid kept symbolic.

    The package's version skips the interpolation when the grid is the pretrained one (a Python
    test on the sizes, which export turns into a guard) and passes ``torch_int(height)`` to the
    interpolation, which is ``int(height)`` outside ``torch.jit`` tracing: each pins the size to the
    example's. Under export this version always interpolates, on the symbolic grid; eager runs the
    original.
    """
    if not torch.compiler.is_compiling():
        return _ORIGINALS["interpolate_pos_encoding"](self, embeddings, height, width)
    num_positions = self.position_embeddings.shape[1] - 1  # a constant of the checkpoint: 576
    side = math.isqrt(num_positions)
    class_pos_embed = self.position_embeddings[:, 0]
    patch_pos_embed = self.position_embeddings[:, 1:].reshape(1, side, side, -1).permute(0, 3, 1, 2)
    dim = embeddings.shape[-1]
    grid = (height // self.config.patch_size, width // self.config.patch_size)  # export-safe: SymInts
    patch_pos_embed = nn.functional.interpolate(
        patch_pos_embed.to(torch.float32), size=grid, mode="bicubic", align_corners=False, antialias=True
    ).to(self.position_embeddings.dtype)
    patch_pos_embed = patch_pos_embed.permute(0, 2, 3, 1).reshape(1, -1, dim)
    return torch.cat((class_pos_embed.unsqueeze(0), patch_pos_embed), dim=1)


_ORIGINALS: dict = {}


def _install_position_cache_skipped():
    position_encoding, _ = _rfdetr_modules()
    _ORIGINALS["position_embedding_forward"] = position_encoding.PositionEmbeddingSine.forward
    return replace(position_encoding.PositionEmbeddingSine, "forward", position_embedding_forward)


def _install_pos_encoding_symbolic_size():
    _, dinov2 = _rfdetr_modules()
    embeddings = dinov2.WindowedDinov2WithRegistersEmbeddings
    _ORIGINALS["interpolate_pos_encoding"] = embeddings.interpolate_pos_encoding
    return replace(embeddings, "interpolate_pos_encoding", interpolate_pos_encoding)


PATCHES: dict[str, Patch] = {
    patch.name: patch
    for patch in [
        Patch(
            "position_cache_skipped",
            "rfdetr.models.position_encoding.PositionEmbeddingSine.forward",
            "TypeError: unhashable type: non-nested SymInt (a cache keyed by tuple(mask.shape))",
            position_embedding_forward,
            _install_position_cache_skipped,
        ),
        Patch(
            "pos_encoding_symbolic_size",
            "rfdetr.models.backbone.dinov2_with_windowed_attn.WindowedDinov2WithRegistersEmbeddings"
            ".interpolate_pos_encoding",
            "no error: a program that accepts only the example's size (int() of the patch grid)",
            interpolate_pos_encoding,
            _install_pos_encoding_symbolic_size,
        ),
    ]
}
"""RF-DETR's export-safe changes, by name, in the order export meets them."""


@contextmanager
def export_patches(*names: str) -> Iterator[tuple[str, ...]]:
    """Apply the named patches (all of :data:`PATCHES` if none are named) inside the block; the
    originals are restored on exit, also when the block raises. Yields the applied names."""
    with apply(PATCHES, *check_names(PATCHES, names)) as applied:
        yield applied


def patch_table() -> str:
    """The patches as a Markdown table (name, what it replaces, the error it fixes)."""
    return _patch_table(PATCHES)
