"""Registering (and, for demonstrations, unregistering) classes as pytree nodes.

`torch.export` takes a model's inputs and outputs apart with `torch.utils._pytree`: a class it does
not know (detectron2's `Instances`, say) cannot cross the boundary of an exported program until it
is registered with a flatten and an unflatten function. `torch.export.save`/`load` also need a
stable `serialized_type_name` and, when the context is not JSON-serializable as it is, a pair of
functions to turn it into JSON and back. Every registration in the book goes through here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.utils._pytree as pytree


def is_registered(cls: type) -> bool:
    """Whether `cls` is currently a pytree node type."""
    return cls in pytree.SUPPORTED_NODES


def register_node(
    cls: type,
    flatten: Callable[[Any], tuple[list[Any], Any]],
    unflatten: Callable[[list[Any], Any], Any],
    *,
    serialized_type_name: str,
    flatten_with_keys: Callable[[Any], tuple[list[tuple[Any, Any]], Any]],
    context_to_json: Callable[[Any], Any] | None = None,
    context_from_json: Callable[[Any], Any] | None = None,
) -> None:
    """Register `cls` so that export can flatten it, name its leaves, and save/load programs using it.

    Idempotent: a class that is already registered is left as it is.
    """
    if is_registered(cls):
        return
    pytree.register_pytree_node(
        cls,
        flatten,
        unflatten,
        serialized_type_name=serialized_type_name,
        to_dumpable_context=context_to_json,
        from_dumpable_context=context_from_json,
        flatten_with_keys_fn=flatten_with_keys,
    )


def unregister_nodes(*classes: type) -> None:
    """Undo the pytree registration of `classes`, so a page can show the failure before the fix.

    For demonstrations only: it relies on the private `torch.utils._pytree._deregister_pytree_node`.
    Classes that are not registered are skipped. It also empties the cache of
    `pytree.treespec_loads`, which would otherwise keep handing out TreeSpecs that refer to the
    unregistered classes (so `torch.export.load` would still succeed), and drops the classes from
    the queue of registrations waiting for the C++ pytree registry.
    """
    for cls in classes:
        if not is_registered(cls):
            continue
        if getattr(pytree, "_cxx_pytree_imported", False):
            raise RuntimeError(
                f"cannot unregister {cls.__name__}: the C++ pytree (optree) registry is loaded and "
                "has no way to remove a registration"
            )
        # Classes registered without a serialized_type_name share one placeholder name, which
        # _deregister_pytree_node deletes with the first of them; restore it for the others.
        name = pytree.SUPPORTED_SERIALIZED_TYPES[cls].serialized_type_name
        pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE.setdefault(name, cls)
        pytree._deregister_pytree_node(cls)
        pending = getattr(pytree, "_cxx_pytree_pending_imports", [])
        pending[:] = [entry for entry in pending if entry[0][0] is not cls]
    pytree.treespec_loads.cache_clear()
