"""Does the saved program load in a process that did not export it?

`torch.export.save` stores each custom operator by name and each pytree class by its serialized
name; `torch.export.load` looks them up in the loading process. The doctor's own save/load round trip
runs where everything is registered, so it cannot see a server that never imported the module
defining them. When the program uses such operators or classes, the doctor loads it in a fresh
interpreter with only `import torch` (`casebook.fresh_process`): what fails there is what the loading
process must import first. Registrations that live in `__main__` (a script or a notebook) cannot be
imported by any other process: that is a finding; the rest is a note naming the imports.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import catalog
from ..fresh_process import run_python
from .program_steps import BUILTIN_NAMESPACES
from .report import Finding
from .session import Session

_BUILTIN_MODULES = ("builtins", "collections", "torch.")
_CAUSE = re.compile(r"We failed to resolve \S+ to an operator|Deserializing \S+ in pytree is not registered")
LOAD_TIMEOUT_S = 120


@dataclass(frozen=True)
class Registration:
    """An operator or pytree class the program names, and the module that defines it ("" if unknown)."""

    what: str
    module: str


def registrations(program: torch.export.ExportedProgram) -> list[Registration]:
    """The custom operators and pytree classes a loading process must have registered."""
    found: dict[str, Registration] = {}
    for graph_module in program.graph_module.modules():
        if not isinstance(graph_module, torch.fx.GraphModule):
            continue
        for node in graph_module.graph.nodes:
            if (
                isinstance(node.target, torch._ops.OpOverload)
                and node.target.namespace not in BUILTIN_NAMESPACES
            ):
                name = f"operator torch.ops.{node.target.namespace}.{node.target._opname}"
                found.setdefault(name, Registration(name, _operator_module(node.target)))
    for spec in (program.call_spec.in_spec, program.call_spec.out_spec):
        for kind in _spec_types(spec):
            if not (kind.__module__ == "builtins" or kind.__module__.startswith(_BUILTIN_MODULES)):
                name = f"pytree class {kind.__module__}.{kind.__qualname__}"
                found.setdefault(name, Registration(name, kind.__module__))
    return list(found.values())


def _operator_module(op: torch._ops.OpOverload) -> str:
    from torch._library.custom_ops import OPDEFS

    definition = OPDEFS.get(f"{op.namespace}::{op._opname}")
    if definition is not None:
        return definition._init_fn.__module__
    return "torchvision" if op.namespace == "torchvision" else ""


def _spec_types(spec) -> list[type]:
    if spec is None:
        return []
    kinds = [spec.type] if spec.type is not None else []
    for child in spec.children_specs:
        kinds += _spec_types(child)
    return kinds


def check_load_elsewhere(session: Session, program) -> None:
    needed = registrations(program)
    with session.step("load elsewhere") as record:
        if not needed:
            record.detail = "the program names no custom operator or pytree class"
            return
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "program.pt2"
            try:
                torch.export.save(program, path)
            except Exception as error:  # the save/load step has reported it
                record.outcome = "not run"
                record.detail = f"the program does not save: {type(error).__name__}"
                return
            result = run_python(f"import torch\ntorch.export.load({str(path)!r})", timeout_s=LOAD_TIMEOUT_S)
        if result.ok:
            record.detail = "a fresh process loads it with `import torch` alone"
            return
        causes = sorted(set(_CAUSE.findall(result.stderr)))
        unimportable = [item for item in needed if item.module == "__main__"]
        imports = sorted({item.module for item in needed if item.module and item.module != "__main__"})
        record.detail = "a fresh process with `import torch` alone cannot load it"
        if not unimportable:
            session.report.notes.append(
                "a process that loads this program must first import "
                + (", ".join(f"`{module}`" for module in imports) or "the modules that register them")
                + f" ({'; '.join(item.what for item in needed)}): with `import torch` alone, "
                + f"`torch.export.load` fails ({'; '.join(causes) or result.error})"
            )
            return
        record.outcome = "failed"
    evidence = [f"a fresh process with `import torch` alone: {result.error}"]
    evidence += [f"logged cause: {cause}" for cause in causes]
    evidence += [f"{item.what} is defined in __main__ (a script or a notebook)" for item in unimportable]
    if imports:
        evidence.append("the loading process must also import " + ", ".join(f"`{name}`" for name in imports))
    session.add(Finding.from_entry(catalog.entry("load-needs-registration"), evidence, "save-load"))
