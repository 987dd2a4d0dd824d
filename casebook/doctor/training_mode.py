"""A model exported in training mode: what `self.training` selected is baked into the program.

Export traces the branch the module's mode selects (`F.dropout(x, p, self.training)`, an
`if self.training:` augmentation, batch-norm statistics) and the program keeps it: its `.eval()`
raises, and nothing in a successful export says the program is a training one. The doctor exports an
eval-mode copy beside the program and compares the operators: a difference is what training mode
baked in.
"""

from __future__ import annotations

import copy
from collections import Counter

import torch

from .. import catalog
from .report import Finding
from .session import Session, first_line

MAX_SHOWN = 6


def in_training_mode(module: torch.nn.Module) -> list[str]:
    """Names of the submodules in training mode ("" for the model itself)."""
    return [name for name, child in module.named_modules() if child.training]


def operator_calls(program: torch.export.ExportedProgram) -> Counter:
    """Each operator call with its boolean arguments (`aten.dropout.default(True)`: the `train` flag),
    counted. Other constants are left out: two exports of one module may bake different numbers (a
    stack depth, a time) whatever its mode."""
    calls = Counter()
    for node in program.graph.nodes:
        if node.op == "call_function":
            flags = [value for value in (*node.args, *node.kwargs.values()) if isinstance(value, bool)]
            calls[f"{node.target}({', '.join(map(str, flags))})"] += 1
    return calls


def check_training_mode(session: Session, module, program, export_again) -> None:
    """When the model is in training mode, export an eval-mode copy with `export_again(module)`
    (which returns ``(program, None)`` or ``(None, error)``) and report the operator calls that differ."""
    training = in_training_mode(module)
    with session.step("training mode") as record:
        if not training:
            record.detail = "the model is in eval mode"
            return
        evaluated, error = export_again(copy.deepcopy(module).eval())
        if error is not None:
            record.outcome = "failed"
            record.detail = f"the eval-mode copy does not export: {first_line(error)}"
            session.report.notes.append(
                "the model is in training mode: export traces training behaviour (dropout, batch "
                "statistics); call `model.eval()` first for an inference program"
            )
            return
        only_training = operator_calls(program) - operator_calls(evaluated)
        only_eval = operator_calls(evaluated) - operator_calls(program)
        if not only_training and not only_eval:
            record.detail = f"{len(training)} module(s) in training mode; the eval-mode program is the same"
            return
        record.outcome = "failed"
        record.detail = f"{sum(only_training.values())} operator call(s) only in training mode"
    shown = [f"only in training mode: {call}" for call in list(only_training)[:MAX_SHOWN]]
    shown += [f"only in eval mode: {call}" for call in list(only_eval)[:MAX_SHOWN]]
    where = "the model was" if "" in training else f"{len(training)} submodule(s) were"
    evidence = [
        f"{where} in training mode when exported; an eval-mode copy exports another program",
        *shown,
        "`program.module().eval()` raises NotImplementedError: the mode cannot be changed after export",
    ]
    basis = "an eval-mode copy, this entry's fix, exports a program with other operator calls (above)"
    session.add(
        Finding.from_entry(catalog.entry("training-mode-baked"), evidence, "training-mode", basis=basis)
    )
