"""Small stand-ins for detectron2's `Boxes` and `Instances`, and their pytree registration.

detectron2 models return their detections as an `Instances` object (one per image) whose fields
hold a `Boxes` object, score and class tensors. Neither class is a tensor, a tuple, a list or a
dict, so `torch.export` does not know how to take them apart: the pytree chapter reproduces that
failure and fixes it.

The two classes below mirror the interface of `detectron2.structures.Boxes` and
`detectron2.structures.Instances` (fields set through the constructor, `set`/`get`/`has`,
`len()`, indexing, `Boxes.area()`), so that the failure and its fixes are the ones a detectron2
user meets. The pytree chapter uses them, rather than detectron2's own, so that the lesson is a
class the reader can read in full (about sixty lines); the detectron2 case study registers and
exports detectron2's real classes with the same helper (:mod:`casebook.pytree_nodes`).

One deliberate difference: detectron2's `Instances.set` checks lengths with Python's `len()`,
which must return a plain `int`. When the number of detections depends on the data (a score
threshold), that length is a symbolic size during export, and turning it into an `int` fails with
a data-dependent-guard error (a different failure class, covered in its own chapter). The length
checks here call `__len__()` directly, which returns the symbolic size untouched. detectron2's own
`Instances.__len__` uses the same trick for the same reason ("len() has to be int and is not
friendly to tracing").

`register_pytree_nodes()` teaches `torch.utils._pytree` how to flatten both classes into tensors
and rebuild them, with the names and JSON-safe context that `torch.export.save`/`load` need.
`unregister_pytree_nodes()` undoes it, so a page can show the failure before the fix.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import GetAttrKey

from casebook.pytree_nodes import is_registered, register_node, unregister_nodes

__all__ = [
    "Boxes",
    "Instances",
    "BOXES_SERIALIZED_NAME",
    "INSTANCES_SERIALIZED_NAME",
    "boxes_flatten",
    "boxes_flatten_with_keys",
    "boxes_unflatten",
    "instances_flatten",
    "instances_flatten_with_keys",
    "instances_unflatten",
    "instances_context_to_json",
    "instances_context_from_json",
    "is_registered",
    "register_pytree_nodes",
    "unregister_pytree_nodes",
]


class Boxes:
    """A list of N boxes stored as an (N, 4) float tensor of (x1, y1, x2, y2) rows.

    Mirrors `detectron2.structures.Boxes`: `len()`, `area()`, indexing (int, slice, bool mask,
    index tensor) returning a new `Boxes`, and the underlying tensor as `.tensor`.
    """

    def __init__(self, tensor: torch.Tensor):
        if tensor.dim() != 2 or tensor.shape[-1] != 4:
            raise ValueError(f"Boxes needs an (N, 4) tensor, got shape {tuple(tensor.shape)}")
        self.tensor = tensor

    def __len__(self) -> int:
        return self.tensor.shape[0]

    def area(self) -> torch.Tensor:
        """The area of every box, shape (N,)."""
        box = self.tensor
        return (box[:, 2] - box[:, 0]) * (box[:, 3] - box[:, 1])

    def __getitem__(self, item) -> Boxes:
        if isinstance(item, int):
            return Boxes(self.tensor[item].view(1, -1))
        return Boxes(self.tensor[item])

    @property
    def device(self) -> torch.device:
        return self.tensor.device

    def __repr__(self) -> str:
        return f"Boxes({self.tensor})"


class Instances:
    """The detections of one image: named fields that all have the same length N.

    Mirrors `detectron2.structures.Instances`: `Instances(image_size, **fields)`, attribute access
    to fields (`instances.scores`), `set`/`get`/`has`/`remove`/`get_fields`, `len()` and indexing
    every field at once. `image_size` is the (height, width) of the image.
    """

    def __init__(self, image_size: tuple[int, int], **fields: Any):
        self._image_size = image_size
        self._fields: dict[str, Any] = {}
        for name, value in fields.items():
            self.set(name, value)

    @property
    def image_size(self) -> tuple[int, int]:
        return self._image_size

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            super().__setattr__(name, value)
        else:
            self.set(name, value)

    def __getattr__(self, name: str) -> Any:
        if name == "_fields" or name not in self._fields:
            raise AttributeError(f"Cannot find field '{name}' in the given Instances!")
        return self._fields[name]

    def set(self, name: str, value: Any) -> None:
        """Add or replace a field; its length must match the existing fields."""
        # __len__() rather than len(): see the module docstring.
        data_len = value.__len__()
        if self._fields and self.__len__() != data_len:
            raise ValueError(
                f"Adding a field of length {data_len} to an Instances of length {self.__len__()}"
            )
        self._fields[name] = value

    def has(self, name: str) -> bool:
        return name in self._fields

    def get(self, name: str) -> Any:
        return self._fields[name]

    def remove(self, name: str) -> None:
        del self._fields[name]

    def get_fields(self) -> dict[str, Any]:
        """The fields, by name (the dict itself: modifying it modifies this object)."""
        return self._fields

    def __getitem__(self, item) -> Instances:
        if isinstance(item, int):
            if item >= len(self) or item < -len(self):
                raise IndexError("Instances index out of range!")
            item = slice(item, None, len(self))
        return Instances(self._image_size, **{name: value[item] for name, value in self._fields.items()})

    def __len__(self) -> int:
        for value in self._fields.values():
            return value.__len__()
        raise NotImplementedError("Empty Instances does not support __len__!")

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}: {value}" for name, value in self._fields.items())
        height, width = self._image_size
        return (
            f"Instances(num_instances={len(self)}, image_height={height}, image_width={width}, "
            f"fields=[{fields}])"
        )


# ---------------------------------------------------------------------------------------------
# Pytree registration: how to take each class apart into tensors and put it back together.
# ---------------------------------------------------------------------------------------------

BOXES_SERIALIZED_NAME = "casebook.models.stand_ins.Boxes"
INSTANCES_SERIALIZED_NAME = "casebook.models.stand_ins.Instances"


def boxes_flatten(boxes: Boxes) -> tuple[list[torch.Tensor], None]:
    """Children: the (N, 4) tensor. Context: nothing."""
    return [boxes.tensor], None


def boxes_flatten_with_keys(boxes: Boxes) -> tuple[list[tuple[GetAttrKey, torch.Tensor]], None]:
    """Like `boxes_flatten`, naming the child `.tensor` (used in paths such as `.pred_boxes.tensor`)."""
    return [(GetAttrKey("tensor"), boxes.tensor)], None


def boxes_unflatten(children, context: None) -> Boxes:
    (tensor,) = children
    return Boxes(tensor)


def instances_flatten(instances: Instances) -> tuple[list[Any], tuple[tuple[int, int], tuple[str, ...]]]:
    """Children: the field values, in order. Context: (image_size, field names).

    The context is static: it is recorded in the exported program's output spec at export time,
    so every output of that program has the image size and field names of the example input.
    """
    names = tuple(instances.get_fields())
    return [instances.get(name) for name in names], (instances.image_size, names)


def instances_flatten_with_keys(instances: Instances):
    """Like `instances_flatten`, naming each child after its field (`.scores`, `.pred_boxes`, ...)."""
    children, context = instances_flatten(instances)
    return [(GetAttrKey(name), child) for name, child in zip(context[1], children, strict=True)], context


def instances_unflatten(children, context) -> Instances:
    image_size, names = context
    return Instances(image_size, **dict(zip(names, children, strict=True)))


def instances_context_to_json(context) -> dict:
    """The context as JSON-serializable data, for `torch.export.save`."""
    image_size, names = context
    return {"image_size": list(image_size), "fields": list(names)}


def instances_context_from_json(data: dict):
    """Inverse of `instances_context_to_json`. JSON has no tuples, so they are rebuilt here: without
    this, a loaded program would return `image_size` as a list and its output structure would no
    longer match the eager model's."""
    return tuple(data["image_size"]), tuple(data["fields"])


def register_pytree_nodes() -> None:
    """Register `Boxes` and `Instances` as pytree nodes that `torch.export` can export and save (idempotent)."""
    register_node(
        Boxes,
        boxes_flatten,
        boxes_unflatten,
        serialized_type_name=BOXES_SERIALIZED_NAME,
        flatten_with_keys=boxes_flatten_with_keys,
    )
    register_node(
        Instances,
        instances_flatten,
        instances_unflatten,
        serialized_type_name=INSTANCES_SERIALIZED_NAME,
        flatten_with_keys=instances_flatten_with_keys,
        context_to_json=instances_context_to_json,
        context_from_json=instances_context_from_json,
    )


def unregister_pytree_nodes(*classes: type) -> None:
    """Undo :func:`register_pytree_nodes` for `classes` (default: `Boxes` and `Instances`); see
    :func:`casebook.pytree_nodes.unregister_nodes`."""
    unregister_nodes(*(classes or (Boxes, Instances)))
