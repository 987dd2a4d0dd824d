"""The doctor's steps in forked child processes: torch crashing in a step is a finding, not the end.

A segmentation fault or an abort inside PyTorch ends the process it happens in, and the reader's
notebook with it; a step that hangs never returns. `run_step` runs one step of the doctor in a child
made with ``fork`` (`casebook.isolation.run_forked`): the child has the model, the program and the
report as they are, runs the step, and sends back what the step added to the report. The parent
takes that in; the step's other effects (a buffer the program wrote, a counter the model advanced)
stay in the child, so every step starts from the state the model and the program were in before it
(except a step whose results cannot be pickled: it runs again in this process, and a note says so).

When the child dies of a signal or runs out of time, the report gets a finding that says so, with
the stage, the Python line the child was on and a line to reproduce it, and the doctor goes on with
the next step. An exception that escapes a step (the doctor's own bug, or torch raising where the step
does not expect it) is a finding too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..isolation import Forked, run_forked, single_threaded
from .frames import Frame
from .report import Finding, Step
from .session import Session

# Steps whose torch work already runs in worker processes of their own, with their own time limits
# (`casebook.backends.tensorrt`): a fork would add nothing but the cost of starting those workers
# again, since a worker started in a child is not kept for the next step. They run here.
IN_WORKERS_ALREADY = frozenset({"TensorRT dry run", "TensorRT engine build"})

# How to run each step's torch call by hand, for a crash finding (the names a reader has in scope).
REPRODUCE = {
    "eager": "model(*args, **kwargs)",
    "run + parity": "program.module()(*args, **kwargs)",
    "run_decompositions": "program.run_decompositions()",
    "save/load": "torch.export.save(program, 'program.pt2'); torch.export.load('program.pt2')",
    "training mode": "torch.export.export(model.eval(), args, kwargs, dynamic_shapes=dynamic_shapes)",
    "size 1": "program.module()(*args_with_size_1)",
    "another size": "program.module()(*args_at_another_size)",
    "input dtypes and layouts": "program.module()(*args_in_another_dtype_or_layout)",
    "custom operators": "torch.library.opcheck(operator, args)",
}

CRASH_FIX = (
    "a crash is a bug in PyTorch or in a C++ extension, not in the export code: run the `reproduce` line "
    "in a fresh process with `python -X faulthandler` for the whole stack, search PyTorch's issues for "
    "the operator in the frames above, and report it with that stack if it is new"
)
TIME_LIMIT_FIX = (
    'run the `reproduce` line on its own with `TORCH_LOGS="+dynamic"` to see where the time goes; '
    "a larger `step_time_limit_s` (`--step-time-limit`) gives a slow step more time"
)

# A step's findings sort with the findings its checks make (`report._RANK`).
RANK_KEY = {
    "training mode": "training-mode",
    "dynamic dims": "dynamic-dims",
    "fake constants": "fake-constants",
    "run + parity": "run",
    "run_decompositions": "decompose",
    "save/load": "save-load",
    "load elsewhere": "save-load",
    "runtime asserts": "runtime-asserts",
    "size 1": "run",
    "input dtypes and layouts": "branches",
    "TensorRT dry run": "tensorrt",
    "TensorRT engine build": "tensorrt",
}

# A faulthandler frame: '  File "/path/to/file.py", line 12 in forward'.
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+) in (?P<function>\S+)', re.M)


def run_step(session: Session, name: str, run: Callable[[], None], *, time_limit_s: float) -> None:
    """Run `run` (a step that writes into `session`) in a forked child and take in its findings,
    notes and step records; a crash, a hang or an escaped exception becomes a finding."""
    report = session.report
    steps_before = len(report.steps)
    output_before = session.example_output

    def in_child() -> tuple[list[Finding], list[str], list[Step], bool, Any]:
        session.progress = None  # the parent reports progress for the steps that come back
        run()
        ran_the_example = session.example_output is not output_before
        return (
            [finding.without_exception() for finding in report.findings],
            list(report.notes),
            report.steps[steps_before:],
            ran_the_example,
            session.example_output if ran_the_example else None,  # a marker object would not survive pickling
        )

    forked = run_forked(in_child, timeout_s=time_limit_s)
    if forked.ok:
        findings, notes, steps, ran_the_example, example_output = forked.value
        report.findings[:] = _keep_exceptions(report.findings, findings)
        report.notes[:] = notes
        if ran_the_example:
            session.example_output = example_output
        for record in steps:
            session._log(record)
    elif forked.crashed:
        add_crash(session, name, forked)
    elif forked.error_type == "Unpicklable":
        # The step finished in the child, but what it found cannot cross the pipe (an output of a
        # class defined inside a function): it did not crash there, so it runs here, on one thread
        # as in a child, without the child's protection.
        note = (
            f"the `{name}` step ran in this process: its results cannot cross from a child process "
            f"({forked.error}), so it had no protection from a crash and started from the state "
            "earlier steps run here left"
        )
        report.notes.append(note)
        with single_threaded():
            run()
    else:
        _add_escaped(session, name, forked)


def _keep_exceptions(here: list[Finding], from_child: list[Finding]) -> list[Finding]:
    """The child's findings, in its order, with this process's own object (and exception) kept for
    each finding that was already here: a step only adds findings or evidence to them."""
    mine: dict[tuple, list[Finding]] = {}
    for finding in here:
        mine.setdefault(_identity(finding), []).append(finding)
    merged = []
    for finding in from_child:
        same = mine.get(_identity(finding))
        kept = same.pop(0) if same else None
        if kept is not None:  # a step may add evidence to it, or establish its cause more strongly
            kept.evidence, kept.strength, kept.basis = finding.evidence, finding.strength, finding.basis
        merged.append(kept or finding)
    return merged


def _identity(finding: Finding) -> tuple:
    return finding.kind, finding.step, finding.title, finding.evidence[0] if finding.evidence else ""


def add_crash(session: Session, name: str, forked: Forked, *, log: bool = True) -> None:
    """The finding for a child that died of a signal or ran out of time in step `name` (and, with
    `log`, the step's record)."""
    what = forked.describe()
    evidence = [f"the child process running the `{name}` step was {what}"]
    evidence += _crash_frames(forked.details)
    if name in REPRODUCE:
        evidence.append(f"reproduce: {REPRODUCE[name]}")
    title = (
        f"`{name}` still running after {forked.seconds:.0f} s"
        if forked.timed_out
        else f"torch crashed in `{name}`: {forked.signal_name}"
    )
    fix = TIME_LIMIT_FIX if forked.timed_out else CRASH_FIX
    session.add(Finding.unclassified(title, evidence, RANK_KEY.get(name, name), fix=fix))
    if log:
        session._log(Step(name, "failed", forked.seconds, what))


def _crash_frames(details: str, count: int = 3) -> list[str]:
    """The innermost Python frames of faulthandler's report, the reader's own first: where it crashed."""
    frames = [match.groupdict() for match in _FRAME.finditer(details)]
    outside = [frame for frame in frames if not _PLUMBING.search(frame["path"])]
    chosen = outside[:1] + frames[: count - 1] if outside else frames[:count]
    return [
        f"at {Frame(frame['path'], int(frame['line']), frame['function']).location} in {frame['function']}"
        for frame in _unique(chosen)
    ]


# Frames that are never the reader's: torch's, and the doctor's own on the way to the step.
_PLUMBING = re.compile(r"/site-packages/torch/|/casebook/doctor/|/casebook/isolation\.py")


def _unique(frames: list[dict]) -> list[dict]:
    seen, kept = set(), []
    for frame in frames:
        key = (frame["path"], frame["line"])
        if key not in seen:
            seen.add(key)
            kept.append(frame)
    return kept


def _add_escaped(session: Session, name: str, forked: Forked) -> None:
    evidence = [f"the `{name}` step raised {forked.error}", *_last_frames(forked.details)]
    title = f"the doctor's `{name}` step raised {forked.error_type}"
    session.add(Finding.unclassified(title, evidence, RANK_KEY.get(name, name)))
    session._log(Step(name, "failed", forked.seconds, forked.error))


def _last_frames(traceback_text: str, count: int = 2) -> list[str]:
    """The innermost frames of a Python traceback, as evidence lines."""
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', traceback_text)
    return [
        f"at {Frame(path, int(line), function).location} in {function}"
        for path, line, function in frames[-count:]
    ]
