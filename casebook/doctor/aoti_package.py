"""The doctor's AOTInductor step: compile the program into a package and see what the package refuses.

The package runs in a worker process (`casebook.backends.refusals.probe`), since a package that
checks nothing may read memory it was never given. Two things are tried:

- with ``AOTI_RUNTIME_CHECK_INPUTS=1``, the example and, for each dynamic size whose exported range
  includes 1, the example cut to 1 there: the check's own range starts at 2
  (``aoti-size-one-refused``);
- with the checks off, as AOTInductor runs by default, the example with its first float32 input
  given as float64 and as a transposed view: where the package runs either and returns other values
  than the ExportedProgram on the same input, or runs what the program refuses
  (``aoti-unchecked-inputs``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from torch.utils import _pytree as pytree

from .. import catalog
from ..backends.aoti import write_package
from ..backends.refusals import outcome, probe, run_here, transposed_view
from ..checked_program import TensorContract, input_contract
from .report import Finding
from .session import Session

STEP = "AOTInductor package"

# What a wrong input did on the package, against the ExportedProgram on the same input.
SLIPPED = {
    "differed": "ran and returned other values than the ExportedProgram",
    "ran, eager refused": "ran, where the ExportedProgram refuses it",
    "crashed": "crashed the process",
}


def check_aoti(session: Session, program: torch.export.ExportedProgram, args: tuple, kwargs: dict) -> None:
    """Compile ``program`` with AOTInductor and run the probes above; one finding per problem met."""
    if kwargs:
        session.skip(STEP, "the package is probed with positional inputs only")
        return
    with session.step(STEP) as record:
        if not session.ran_clean:
            record.detail = "not tried, the program failed on the example"
            return
        folder = Path(tempfile.mkdtemp(prefix="doctor-aoti-"))
        package = folder / "p.pt2"
        try:
            write_package(program, package)  # the registry's AOTInductor write, as lower() compiles
        except Exception as error:  # every compile error is reported, classified or not
            record.outcome = "failed"
            session.add(session.classified(error, "aoti", STEP, "compiling the package:"))
            return
        _, contracts = input_contract(program)  # unlifts the program once, for both probes
        size_one = _cut_to_one(contracts, args)
        wrong = _wrong_inputs(contracts, args)
        checked_cases = [("the example inputs", (args, {})), *((label, (a, {})) for label, a in size_one)]
        checked = probe("AOTInductor (Python)", package, checked_cases, check_inputs=True)
        # Checks off, as AOTInductor runs by default; the reference is the ExportedProgram on the same input.
        wrong_cases = [(label, (a, {})) for label, a in wrong]
        unchecked = probe("AOTInductor (Python)", package, wrong_cases, check_inputs=False) if wrong else []
        references = run_here(program.module(), wrong_cases)
        results = [outcome(raw, ref) for raw, ref in zip(unchecked, references, strict=True)]
        slipped = [
            f"{label}, AOTI_RUNTIME_CHECK_INPUTS unset: {SLIPPED[result.kind]}"
            + (f" ({result.detail})" if result.detail else "")
            for (label, _), result in zip(wrong_cases, results, strict=True)
            if result.kind in SLIPPED
        ]
        refused_one = [
            (label, raw.error)
            for (label, _), raw in zip(size_one, checked[1:], strict=True)
            if raw.outputs is None
        ]
        record.detail = (
            f"compiled; the example {'ran' if checked[0].outputs is not None else 'was refused'} with "
            f"AOTI_RUNTIME_CHECK_INPUTS=1, {len(size_one)} size(s) tried at 1, "
            f"{len(wrong)} wrong input(s) tried without the checks"
        )
        if checked[0].outputs is None or refused_one or slipped:
            record.outcome = "failed"
    if checked[0].outputs is None:
        session.add(session.classified(_as_error(checked[0].error), "aoti", STEP, "the example inputs:"))
    for label, error_line in refused_one:
        context = f"`{label}` = 1, inside the exported range:"
        session.add(session.classified(_as_error(error_line), "aoti", STEP, context))
    if slipped:
        evidence = [
            *slipped,
            "the package's generated code checks dtype, sizes and strides only when AOTI_RUNTIME_CHECK_INPUTS=1",
        ]
        session.add(Finding.from_entry(catalog.entry("aoti-unchecked-inputs"), evidence, STEP))


def _cut_to_one(contracts: list[TensorContract | None], args: tuple) -> list[tuple[str, tuple]]:
    """For each symbol whose exported range includes 1: the args with every size of that symbol cut to 1."""
    leaves, spec = pytree.tree_flatten(args)
    if len(leaves) != len(contracts):  # keyword inputs or constants: not probed
        return []
    symbols: dict[str, str] = {}  # symbol -> the first place it appears, as the reader writes it
    for contract in contracts:
        for index, dim in enumerate(contract.dims if contract else ()):
            if dim.symbol and dim.low <= 1:
                symbols.setdefault(dim.symbol, f"{contract.name}.shape[{index}]")
    probes = []
    for symbol, label in symbols.items():
        cut = []
        for contract, leaf in zip(contracts, leaves, strict=True):
            if contract is not None:
                for index, dim in enumerate(contract.dims):
                    if dim.symbol == symbol:
                        leaf = leaf.narrow(index, 0, 1)
            cut.append(leaf)
        probes.append((label, tuple(pytree.tree_unflatten(cut, spec))))
    return probes


def _wrong_inputs(contracts: list[TensorContract | None], args: tuple) -> list[tuple[str, tuple]]:
    """The example with its first float32 input as float64, and as a transposed view (same shape)."""
    leaves, spec = pytree.tree_flatten(args)
    if len(leaves) != len(contracts):
        return []
    for index, (contract, leaf) in enumerate(zip(contracts, leaves, strict=True)):
        if contract is not None and isinstance(leaf, torch.Tensor) and leaf.dtype == torch.float32:
            variants = [(f"`{contract.name}` as float64", leaf.double())]
            if leaf.dim() >= 2 and min(leaf.shape[-2:]) > 1:
                view = transposed_view(leaf)
                variants.append((f"`{contract.name}` as a transposed view (strides {view.stride()})", view))
            return [
                (label, tuple(pytree.tree_unflatten([*leaves[:index], value, *leaves[index + 1 :]], spec)))
                for label, value in variants
            ]
    return []


def _as_error(line: str) -> BaseException:
    """A worker's "RuntimeError: message" line as an exception the catalog can classify."""
    kind, _, message = line.partition(": ")
    return RuntimeError(message) if kind == "RuntimeError" else RuntimeError(line)
