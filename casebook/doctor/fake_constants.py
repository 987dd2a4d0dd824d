"""Constants that are fake tensors: what strict export makes of `.data`.

Strict export (TorchDynamo) lifts ``self.count.data`` as a constant of the program, and the constant it
stores is a `FakeTensor`, the tracing stand-in with a shape and no values (non-strict export refuses
such a program: "We found a fake tensor in the exported program constant's list"). A write through
``.data`` then lands in that constant, never in the buffer: the program raises nothing and returns,
call after call, what eager returned on the first call. On torch 2.14.1 ``run_decompositions()``
crashes the Python process (a segmentation fault) on such a program, so the doctor skips it.

The finding needs evidence of its own: a constant of the program that is a `FakeTensor` and an
in-place operator of the graph that writes it (`casebook.introspect.mutations` names the line). Two
calls of an eager copy and of the program from the same state add which buffers eager changes and
the program does not. A program whose fake constants are only read gets a note, not this finding.
"""

from __future__ import annotations

import copy

import torch
from torch._subclasses.fake_tensor import FakeTensor

from .. import catalog
from ..introspect import mutations
from .copies import run_on_copies
from .report import Finding
from .session import Session, first_line

STEP = "fake constants"
# Steps that must not run on a program that writes a fake constant: run_decompositions() kills the
# process (a program that only reads one decomposes).
CRASHES = {
    "run_decompositions": "the program writes a constant that is a fake tensor (see above): "
    "run_decompositions() crashes the Python process on it (torch 2.14.1)"
}


def fake_constants(program: torch.export.ExportedProgram) -> list[str]:
    """The names of the program's constants that are fake tensors (no values, only a shape)."""
    return [name for name, value in program.constants.items() if isinstance(value, FakeTensor)]


def writes_into(program: torch.export.ExportedProgram, names: list[str]) -> list[dict[str, str]]:
    """The in-place operators of the graph that write one of the constants `names` (rows of `mutations`)."""
    return [row for row in mutations(program) if row["kind"] == "CONSTANT_TENSOR" and row["target"] in names]


def writes_a_fake_constant(program: torch.export.ExportedProgram) -> bool:
    """Whether the graph writes in place into one of the program's fake constants."""
    names = fake_constants(program)
    return bool(names and writes_into(program, names))


def _state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: value.detach().clone() for name, value in module.state_dict(keep_vars=True).items()}


def state_eager_changes_alone(module, program, args, kwargs, calls: int = 2) -> list[str]:
    """The buffers and parameters that `calls` calls change in an eager copy of `module` and leave
    unchanged in the program, both starting from the module's present state. The program's own state
    (shared with the module) is restored afterwards."""
    reference = copy.deepcopy(module)
    runnable = program.module()
    start = _state(reference)
    saved = _state(runnable)
    try:
        for _ in range(calls):
            run_on_copies(reference, args, kwargs)
            run_on_copies(runnable, args, kwargs)
        eager_after, program_after = _state(reference), _state(runnable)
    finally:
        with torch.no_grad():
            for name, value in runnable.state_dict(keep_vars=True).items():
                value.copy_(saved[name])
    return [
        name
        for name, before in start.items()
        if name in program_after
        and not torch.equal(eager_after[name], before)
        and torch.equal(program_after[name], saved[name])
    ]


def check_fake_constants(session: Session, module, program, args, kwargs) -> None:
    """Report a write through `.data` that the program drops (`data-write-dropped`)."""
    with session.step(STEP) as record:
        fakes = fake_constants(program)
        if not fakes:
            record.detail = "none"
            return
        writes = writes_into(program, fakes)
        record.outcome = "failed"
        record.detail = f"{len(fakes)} constant(s) with no values, {len(writes)} write(s) into them"
        if not writes:
            session.report.notes.append(
                f"the program's constant(s) {', '.join(f'`{name}`' for name in fakes)} are fake tensors "
                "(strict export of a read through `.data`): outputs computed from them are fake tensors "
                "too; read the tensor itself instead of `.data`"
            )
            return
        evidence = [
            f"`{row['code']}` writes the constant `{row['target']}` ({row['op']}), which is a FakeTensor: "
            "strict export's stand-in for `.data`, not the buffer"
            for row in writes
        ]
        try:
            unchanged = state_eager_changes_alone(module, program, args, kwargs)
        except Exception as error:  # the evidence above stands; say why this part is missing
            session.report.notes.append(f"two calls from the same state not compared: {first_line(error)}")
        else:
            if unchanged:
                evidence.append(
                    "called twice from the same state, eager changes "
                    + ", ".join(f"`{name}`" for name in unchanged)
                    + (
                        "; the program leaves them as they were"
                        if len(unchanged) > 1
                        else "; the program leaves it as it was"
                    )
                )
    session.add(Finding.from_entry(catalog.entry("data-write-dropped"), evidence, "fake-constants"))
