"""A shape the model keeps between calls, which pins the dimensions export was told are dynamic.

A `forward` that caches what it computes, keyed by a shape (``if self.shape != x.shape: ...;
self.shape = x.shape``, as Ultralytics' ``Detect`` head does), compares under export the cached
`torch.Size` with the traced symbolic shape. After an eager call the cache holds the example's shape:
the sizes are equal, element by element, and export records each equality as a guard, so every
dimension declared dynamic is pinned to the example ("Constraints violated", suggested fix
``height = 320``). The message reads like code that needs a static size; what pins it is the state the
model was left in.

The doctor tests that on a copy: every `torch.Size` the model keeps in a plain attribute is forgotten
(the class's default shows through again, or None), and the copy is exported with the same
`dynamic_shapes`. The dimensions pinned before and not after were pinned by the cache: confirmed by
the fix. Only `torch.Size` values are forgotten: configuration (a kernel size, a stride) is kept in
tuples and lists.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import torch

from .. import catalog
from ..introspect import suggested_fixes
from .module_state import _MODULE_INTERNALS
from .report import CONFIRMED, Finding
from .session import Session, first_line

STEP = "shape cache"
MAX_SHOWN = 4  # attribute names in a finding
# A suggested fix that makes a dimension a constant: "batch = 2" (not "h = 32*_h" or a Dim(...)).
_PINNED = re.compile(r"^(\w+) = (\d+)$")
_VIOLATION = "Constraints violated"


def cached_shapes(module: Any) -> list[tuple[str, torch.nn.Module, str]]:
    """(dotted name, submodule, attribute) of every `torch.Size` kept in a plain attribute of
    ``module`` or a submodule, each submodule once. Empty for something that is not a module."""
    if not isinstance(module, torch.nn.Module):
        return []
    found, seen = [], set()
    for path, submodule in module.named_modules():
        if id(submodule) in seen:
            continue
        seen.add(id(submodule))
        for name, value in vars(submodule).items():
            if name not in _MODULE_INTERNALS and isinstance(value, torch.Size):
                found.append((f"{path}.{name}" if path else name, submodule, name))
    return found


def pinned_dims(message: str) -> dict[str, int]:
    """{dimension: size} for each dimension the message's suggested fixes make a constant."""
    pinned = {}
    for line in suggested_fixes(message):
        match = _PINNED.match(line)
        if match:
            pinned[match.group(1)] = int(match.group(2))
    return pinned


def _still_needed(error: BaseException) -> str:
    fixes = suggested_fixes(str(error))
    return f"export suggests {'; '.join(fixes)}" if fixes else first_line(error)


def forget_cached_shapes(module: torch.nn.Module) -> torch.nn.Module:
    """A deep copy of ``module`` with every cached `torch.Size` (`cached_shapes`) forgotten: removed
    where the class declares a default (which then shows through), set to None otherwise."""
    forgetful = copy.deepcopy(module)
    for _, submodule, name in cached_shapes(forgetful):
        if hasattr(type(submodule), name):
            delattr(submodule, name)
        else:
            setattr(submodule, name, None)
    return forgetful


def check_shape_cache(
    session: Session,
    finding: Finding | None,
    module: Any,
    export_copy: Callable[[torch.nn.Module], tuple[Any, BaseException | None]],
) -> None:
    """For a constraint violation that pins dimensions to constants, in a model that keeps shapes:
    export again (``export_copy(copy)`` returns ``(program, None)`` or ``(None, error)``) from a copy
    that forgot them. The dimensions that are then free were pinned by the cache: the finding goes to
    `shape-cache-pins-dims` when they are all it named, and a finding of that entry is added for them
    otherwise (the rest keep their cause)."""
    if finding is None or finding.exception is None or _VIOLATION not in str(finding.exception):
        return
    pinned = pinned_dims(str(finding.exception))
    caches = cached_shapes(module)
    if not pinned or not caches:
        return
    names = ", ".join(f"`{name}`" for name, _, _ in caches[:MAX_SHOWN]) + (
        " ..." if len(caches) > MAX_SHOWN else ""
    )
    with session.step(STEP) as record:
        try:
            forgetful = forget_cached_shapes(module)
        except Exception as error:  # a model that cannot be copied: nothing to conclude
            record.outcome, record.detail = "failed", f"could not copy the model: {first_line(error)}"
            return
        _, error = export_copy(forgetful)
        if error is None:
            still = {}
        elif _VIOLATION in str(error):
            still = pinned_dims(str(error))
        else:  # another failure once the cache is gone: it says nothing about the pins
            record.outcome = "failed"
            record.detail = f"with {names} forgotten export fails otherwise: {first_line(error)}"
            return
        freed = {dim: size for dim, size in pinned.items() if dim not in still}
        if not freed:
            record.detail = f"with {names} forgotten the same dimensions stay pinned"
            return
        record.detail = f"{', '.join(freed)} free with {names} forgotten"
    dims = ", ".join(f"{dim} = {size}" for dim, size in freed.items())
    basis = (
        f"the doctor exported a copy with {names} forgotten (set to the class default or None) and "
        f"the same dynamic_shapes: {', '.join(freed)} no longer pinned"
        + ("; export passed" if error is None else "")
    )
    evidence = [
        f"the model keeps shapes in plain attributes: {names}, as the last call left them",
        f"export pinned {dims} to the example because the code compares the traced shape with a cached one",
        "without the cache: " + ("export passes" if error is None else _still_needed(error)),
    ]
    entry = catalog.entry("shape-cache-pins-dims")
    if len(freed) == len(pinned):
        finding.reclassify(entry, strength=CONFIRMED, basis=basis)
        finding.evidence[1:1] = evidence
    else:
        session.add(Finding.from_entry(entry, evidence, "export", strength=CONFIRMED, basis=basis))
