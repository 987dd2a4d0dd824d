"""Export-safe changes to third-party code (torchvision, detectron2), applied only inside a block.

One mechanism for every patch set: a :class:`Patch` names what it replaces and the error it fixes,
:func:`replace` swaps one attribute and returns its undo, and :func:`apply` installs a chosen set of
patches for the duration of a ``with`` block and restores the originals on exit, also when the block
raises. Nothing in site-packages is edited. The patch sets themselves live in
:mod:`casebook.patches.torchvision`, :mod:`casebook.patches.detectron2` and, for the book's own
Deformable DETR on its way to TensorRT, :mod:`casebook.models.deformable_detr_patches`.
"""

from .core import Patch, apply, patch_table, replace, undo_all

__all__ = ["Patch", "apply", "patch_table", "replace", "undo_all"]
