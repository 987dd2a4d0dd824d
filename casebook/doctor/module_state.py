"""What export left in the model: fake tensors (and symbolic sizes) in plain attributes.

A `forward` that stores what it computes on the module (a cache of anchors keyed by a shape, as
Ultralytics' ``Detect`` head keeps) stores, under export, the fake tensors export traces with. Export
warns ("... were assigned during export") and returns a correct program, but the model keeps the
fakes, and a later eager call that reads the cache returns `FakeTensor`s without an error
(pytorch/pytorch#155114). The doctor exports the reader's own model, so it snapshots the plain
attributes first (`snapshot`), then names and restores (`restore_fakes`) each one export left
holding a fake: the reader's model leaves the doctor as it came in.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils import _pytree as pytree

from .. import catalog
from .report import Finding
from .session import Session

MAX_SHOWN = 6  # attribute names in a finding
# An nn.Module's own bookkeeping (_parameters, _buffers, _modules, training, hooks): not the model's state
_MODULE_INTERNALS = frozenset(vars(torch.nn.Module()))

Snapshot = dict[tuple[str, str], Any]


def _plain_attributes(module: torch.nn.Module):
    for path, submodule in module.named_modules(remove_duplicate=False):
        for name, value in vars(submodule).items():
            if name not in _MODULE_INTERNALS:
                yield path, submodule, name, value


def snapshot(module: Any) -> Snapshot:
    """Every plain attribute of ``module`` and its submodules, by (submodule path, name): the values
    themselves, not copies (what export writes is a new object, so the old one is kept intact).
    Empty for something that is not a module."""
    if not isinstance(module, torch.nn.Module):
        return {}
    return {(path, name): value for path, _, name, value in _plain_attributes(module)}


def holds_fake(value: Any) -> bool:
    """Whether ``value`` is, or holds in a list, tuple, dict or ``torch.Size``, a `FakeTensor` or a
    symbolic size (``torch.SymInt``): what exists only inside a trace."""
    if isinstance(value, torch.Size):
        return any(isinstance(size, torch.SymInt) for size in value)
    return any(
        isinstance(leaf, FakeTensor | torch.SymInt | torch.SymFloat | torch.SymBool)
        or (isinstance(leaf, torch.Size) and holds_fake(leaf))
        for leaf in pytree.tree_leaves(value)
    )


def restore_fakes(module: Any, before: Snapshot) -> list[str]:
    """Name every plain attribute that holds a fake now (dotted: ``model.23.anchors``, in the order
    of the modules), and put each submodule that holds one back as it was: every plain attribute
    export set or changed there returns to its old value, or is removed when it is new, so a cache
    and the key it is stored under (``shape``) stay consistent."""
    if not isinstance(module, torch.nn.Module):
        return []
    fakes: list[str] = []
    touched: dict[int, tuple[str, torch.nn.Module]] = {}
    for path, submodule, name, value in _plain_attributes(module):
        if not holds_fake(value):
            continue
        first_path, _ = touched.setdefault(id(submodule), (path, submodule))
        if first_path == path:  # a submodule used twice is named once
            fakes.append(f"{path}.{name}" if path else name)
    for path, submodule in touched.values():
        for name, value in list(vars(submodule).items()):
            if name in _MODULE_INTERNALS:
                continue
            if (path, name) not in before:
                delattr(submodule, name)  # new: the class default, if any, shows through again
            elif value is not before[(path, name)]:
                setattr(submodule, name, before[(path, name)])
    return fakes


def report_fakes(session: Session, left: list[str], *, exported: bool) -> None:
    """The attributes export left holding fakes (already restored): a finding when export passed,
    a note beside the export error otherwise."""
    names = ", ".join(f"`{name}`" for name in left[:MAX_SHOWN]) + (" ..." if len(left) > MAX_SHOWN else "")
    if not exported:
        session.report.notes.append(
            f"export also left fake tensors or symbolic sizes in {names} (attributes `forward` writes); "
            "the doctor put the old values back"
        )
        return
    evidence = [
        f"export left fake tensors or symbolic sizes in {names}: plain attributes `forward` assigns",
        "an eager call that reads them after export returns FakeTensors, without an error; the doctor "
        "put the values from before the export back, so the model you passed is as it was",
    ]
    basis = "the doctor compared the model's plain attributes before and after export"
    session.add(
        Finding.from_entry(catalog.entry("fake-tensors-left-in-model"), evidence, "export", basis=basis)
    )
