"""The doctor's device step: does the program run on the device it will be shipped to?

Export keeps two kinds of tensors on the device the model was traced on: the tensor constants that
``forward`` made from Python numbers (``torchvision``'s ``Normalize`` turns its mean and std into
tensors) and the device argument of every tensor the program creates
(``torch.arange(n, device=x.device)``). ``program.module().to(device)`` moves the parameters and
buffers, not those, and the first operator that mixes the two raises. ``torch.export.passes
.move_to_device_pass`` moves them too.

The step runs only when the reader names a device (``diagnose(..., device="cuda")``). Where that
device is not on this machine, the ``meta`` device stands in for it: it has the same rule (tensors on
two devices do not mix) and needs no hardware, but computes no values, so parity is not checked there.
"""

from __future__ import annotations

import copy
import io

import torch
from torch.export.passes import move_to_device_pass
from torch.utils import _pytree as pytree

from .. import catalog
from .copies import run_on_copies
from .report import CONFIRMED, EVIDENCE, Finding
from .session import Session, first_line

STEP = "another device"
MAX_SHOWN = 4

# An operator given tensors on two devices; the catalog entry's pattern holds each message seen.
DEVICE_MISMATCH = catalog.entry("device-baked").regex


def stand_in_for(device: str | torch.device) -> torch.device:
    """The device the check runs on: ``device`` itself where this machine has it, else ``meta``."""
    try:
        target = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(
            f"device must name a torch device such as 'cuda' or 'cpu', got {device!r} ({error})"
        ) from None
    if target.type == "cpu" or target.type == "meta":
        return target
    backend = getattr(torch, target.type, None)
    available = getattr(backend, "is_available", None)
    return target if callable(available) and available() else torch.device("meta")


def pinned_tensors(program: torch.export.ExportedProgram) -> list[str]:
    """What stays on the traced device under ``.to()``: the tensor constants the program holds (a tensor
    made in ``forward`` from Python numbers, such as ``Normalize``'s mean) and each operator call with a
    fixed ``device`` argument."""
    constants = [
        f"constant {name} {tuple(value.shape)} on {value.device}"
        for name, value in program.constants.items()
        if isinstance(value, torch.Tensor)
    ]
    calls = [
        f"{node.name}: {node.target}(device={node.kwargs['device']})"
        for node in program.graph.nodes
        if node.op == "call_function" and node.kwargs.get("device") is not None
    ]
    return constants + calls


def _moved(tree, device: torch.device):
    return pytree.tree_map_only(torch.Tensor, lambda tensor: tensor.to(device), tree)


def _copy_of(program: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """A copy the pass may change. Through save and load: `copy.deepcopy` renames a placeholder called
    ``input`` (``input_1``), which the pass's validation then refuses. A program that does not save
    (the save/load step reports why) is deep-copied instead."""
    buffer = io.BytesIO()
    try:
        torch.export.save(program, buffer)
    except Exception:  # reported by the save/load step; a deep copy still serves most programs
        return copy.deepcopy(program)
    buffer.seek(0)
    return torch.export.load(buffer)


def check_device(session: Session, program, args: tuple, kwargs: dict, device: str | torch.device) -> None:
    """Move the program with ``.to(device)`` and run it on the example moved there. When that raises, run
    ``move_to_device_pass``'s program (on a copy: the pass changes the program it is given) on the same
    inputs: the two differ only in what stayed behind, so where the pass runs, the device baked into
    the program is the cause, whatever the operator's message. Where both raise, a device mismatch
    message still decides it; any other error (an operator `meta` lacks) leaves the question open."""
    run_on = stand_in_for(device)
    where = str(device) if run_on == torch.device(device) else f"{device} (meta stands in)"
    with session.step(STEP) as record:
        if not session.ran_clean:
            record.detail = "not tried, the program failed on the example"
            return
        moved_args, moved_kwargs = _moved(args, run_on), _moved(kwargs, run_on)
        try:
            run_on_copies(program.module().to(run_on), moved_args, moved_kwargs)
        except Exception as error:  # an outcome: what .to() left behind, or an operator meta lacks
            moved_error = error
        else:
            record.detail = f"moved with .to(), the program runs on {where}"
            return
        try:
            run_on_copies(move_to_device_pass(_copy_of(program), run_on).module(), moved_args, moved_kwargs)
            fixed = "move_to_device_pass(program, device) runs on the same inputs"
            strength, basis = (
                CONFIRMED,
                f"this entry's fix, `move_to_device_pass`, made the program run on {where}",
            )
        except Exception as error:  # the pass did not help: only a device message can still decide
            if not DEVICE_MISMATCH.search(str(moved_error)):
                record.detail = f"not decided on {where}: the program raised {first_line(moved_error)}"
                return
            fixed = f"move_to_device_pass(program, device) raised too: {first_line(error)}"
            strength, basis = EVIDENCE, "the program raised a device mismatch once moved with `.to()`"
        record.outcome = "failed"
        baked = pinned_tensors(program)
        record.detail = f"moved with .to(), the program raised on {where}"
    evidence = [
        first_line(moved_error),
        *baked[:MAX_SHOWN],
        *([f"... and {len(baked) - MAX_SHOWN} more"] if len(baked) > MAX_SHOWN else []),
        fixed,
    ]
    session.add(
        Finding.from_entry(
            catalog.entry("device-baked"), evidence, STEP, moved_error, strength=strength, basis=basis
        )
    )
