"""`diagnose`: take a model through every step a shipped program needs and report what fails.

The steps, each going as far as it can instead of stopping at the first error:

1. eager: run the model on the example inputs (the reference; when eager fails there is nothing to
   diagnose, and `DoctorUsageError` says so);
2. a callable that is not an ``nn.Module`` is itself a finding; it is wrapped and the steps go on;
3. ``torch.export.export`` (non-strict unless ``strict=True``), watching for code that asks
   ``torch.compiler.is_compiling()``;
4. if that fails: the other mode, to compare, and ``draft_export``, which lists every problem at once;
5. on the exported program: requested dynamic dimensions against the program's shapes; constants
   that are fake tensors (strict export of a write through ``.data``); runs on the
   example inputs (and on ``check_inputs``) compared with eager; ``run_decompositions()``, and the
   decomposed program run and compared; a
   ``torch.export.save``/``load`` round trip; the runtime asserts left in the graph; each custom
   operator's fake kernel against its real kernel (``torch.library.opcheck``); each dynamic dimension
   whose range includes 1, at 1, against eager; each tensor input in other dtypes and another
   memory layout, to eager and to the program (a check lost in export, or an assumption about the
   example's dtype or strides kept: `casebook.doctor.input_variants`); with
   ``aoti=True``, an AOTInductor package and what it refuses (`casebook.doctor.aoti_package`); with
   ``device="cuda"``, the program moved to that device and run there (`casebook.doctor.other_device`);
   and, with ``tensorrt=True``, Torch-TensorRT's dry run and a real engine build.

Every exception is classified with `casebook.catalog`; one the catalog does not know becomes an
``unclassified`` finding that sends the reader to the playbook, never to a guessed page. The eager
run and the steps after export run in forked child processes (`casebook.doctor.isolated`), so torch
crashing in one of them is a finding too.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import io
import math
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch._dynamo.exc import TorchDynamoException

from .. import catalog
from ..isolation import Forked, run_forked, single_threaded
from . import (
    aoti_package,
    export_steps,
    fake_constants,
    input_variants,
    isolated,
    module_state,
    other_device,
    program_steps,
)
from .copies import run_on_copies
from .load_elsewhere import check_load_elsewhere
from .other_sizes import check_another_size
from .report import Report, Step
from .session import NO_PROGRAM, Session, first_line
from .training_mode import check_training_mode


class DoctorUsageError(ValueError):
    """The inputs to `diagnose` are unusable: wrong types, or the model fails in eager mode."""


def diagnose(
    model: Callable,
    args: tuple | list,
    kwargs: dict | None = None,
    dynamic_shapes: Any = None,
    *,
    strict: bool = False,
    compare: bool = True,
    draft: bool = True,
    check_inputs: Sequence[Any] = (),
    aoti: bool = False,
    device: str | torch.device | None = None,
    tensorrt: bool = False,
    name: str | None = None,
    progress: Callable[[Step], None] | None = None,
    isolate: bool = True,
    step_time_limit_s: float = 1800,
) -> Report:
    """Diagnose `model` exported on (`args`, `kwargs`) with `dynamic_shapes`; see the module docstring.

    ``strict=True`` exports in strict mode (TorchDynamo) instead of non-strict. When export fails,
    ``compare`` also tries the other mode and ``draft`` runs `draft_export`. ``check_inputs`` are more
    inputs to run the exported program on and compare with eager (each an args tuple, or a dict with
    ``args`` and ``kwargs``): a batch of another size, an image with no detections. ``aoti=True``
    compiles an AOTInductor package and runs it in a worker process, with its input checks on and
    off (`casebook.doctor.aoti_package`). ``device`` names the device the program will run on
    (``"cuda"``): the program is moved there and run (`casebook.doctor.other_device`; the ``meta``
    device stands in for one this machine lacks). ``tensorrt=True``
    adds Torch-TensorRT's dry run and a real engine build (`casebook.backends.tensorrt.engine.build_engines`).
    ``progress`` is called with each finished `Step`.

    With ``isolate`` (the default) the eager reference run and every step after export run in a
    forked child process (`casebook.doctor.isolated`): torch crashing there (a segmentation fault,
    an abort) or a step running past ``step_time_limit_s`` seconds is a finding and the report goes
    on, and each step starts from the model's and the program's state before it, so a model that
    writes its own state (a counter, a cache) is compared call for call from the same state.
    ``isolate=False`` runs everything in this process, on the model and the program themselves
    (for a debugger; a model that writes its state then shows the writes of earlier steps).

    Raises `DoctorUsageError` for arguments of the wrong type and for a model that fails in eager
    mode on the example or on a check input.
    """
    args, kwargs = _check_inputs(model, args, kwargs)
    if device is not None:
        try:
            other_device.stand_in_for(device)  # a name that is not a device is refused before any work
        except ValueError as error:
            raise DoctorUsageError(str(error)) from None
    if isinstance(step_time_limit_s, bool) or not (
        isinstance(step_time_limit_s, int | float) and 0 < step_time_limit_s < math.inf
    ):
        raise DoctorUsageError(
            f"step_time_limit_s must be a positive, finite number of seconds, got {step_time_limit_s!r}"
        )
    checks = [_check_input(index, item) for index, item in enumerate(check_inputs)]
    report = Report(name or _model_name(model))
    session = Session(report, progress)
    inputs = [("the example inputs", args, kwargs), *checks]
    if isolate and torch.cuda.is_initialized():
        isolate = False  # a forked child cannot use CUDA once this process has started it
        report.notes.append(
            "CUDA is initialized in this process and a forked child cannot use it: every step ran "
            "here, without protection from a crash (start a fresh process and call `diagnose` before "
            "anything touches CUDA, or pass CPU inputs, to get it)"
        )
    started = time.perf_counter()
    try:
        with _quiet():
            with session.step("eager") as record:
                record.outcome = "failed"  # until every input has run
                forked = _eager_in_a_child(model, inputs, step_time_limit_s) if isolate else None
                if forked is not None and forked.crashed:
                    record.detail = forked.describe()
                    isolated.add_crash(session, "eager", forked, log=False)
                    session.skip(
                        "export",
                        "the model crashes torch in eager mode: there is no reference to compare with",
                    )
                    return report
                try:
                    if forked is not None and forked.ok:
                        outputs, notes = forked.value
                        runs = [(*given, output) for given, output in zip(inputs, outputs, strict=True)]
                        report.notes += notes
                    else:  # an error to classify here, or outputs that cannot cross from the child
                        with single_threaded() if isolate else contextlib.nullcontext():
                            runs = _eager_runs(model, inputs, report.notes)
                        if forked is not None and forked.error_type != "Unpicklable":
                            report.notes.append(
                                f"eager raised {forked.error} in a child process and ran here: a "
                                "model whose eager run depends on the process it runs in"
                            )
                except _ExportErrorInEager as known:
                    record.detail = (
                        "raised an error export raises too (control-flow operators trace in eager)"
                    )
                    session.add(session.classified(known.error, "eager", "eager"))
                    session.skip("export", "the model fails in eager mode: fix the finding above first")
                    return report
                record.outcome, record.detail = "passed", f"{len(runs)} input(s)"
            module = _as_module(session, model, args, kwargs, dynamic_shapes)
            attributes_before = module_state.snapshot(module)
            program = export_steps.export(
                session, module, args, kwargs, dynamic_shapes, strict=strict, compare=compare, draft=draft
            )
            left_fake = module_state.restore_fakes(module, attributes_before)
            if left_fake:
                module_state.report_fakes(session, left_fake, exported=program is not None)
            report.program = program
            steps = [
                (
                    "training mode",
                    lambda: check_training_mode(
                        session,
                        module,
                        program,
                        lambda eval_copy: export_steps.try_export(
                            eval_copy, args, kwargs, dynamic_shapes, strict
                        ),
                    ),
                ),
                (
                    "dynamic dims",
                    lambda: program_steps.check_dims(session, module, program, args, kwargs, dynamic_shapes),
                ),
                (
                    fake_constants.STEP,
                    lambda: fake_constants.check_fake_constants(session, module, program, args, kwargs),
                ),
                ("run + parity", lambda: program_steps.check_runs(session, program, runs)),
                (
                    "run_decompositions",
                    lambda: program_steps.check_decompositions(session, program, args, kwargs),
                ),
                ("save/load", lambda: program_steps.check_save_load(session, program, args, kwargs)),
                ("load elsewhere", lambda: check_load_elsewhere(session, program)),
                ("runtime asserts", lambda: program_steps.check_runtime_asserts(session, program)),
                (
                    "custom operators",
                    lambda: program_steps.check_custom_operators(session, program, args, kwargs),
                ),
                (
                    "size 1",
                    lambda: program_steps.check_size_one(
                        session, module, program, args, kwargs, dynamic_shapes
                    ),
                ),
                (
                    "another size",
                    lambda: check_another_size(session, module, program, args, kwargs, dynamic_shapes),
                ),
                (
                    input_variants.STEP,
                    lambda: input_variants.check_input_variants(session, module, program, args, kwargs),
                ),
            ]
            if device is not None:
                steps.append(
                    (
                        other_device.STEP,
                        lambda: other_device.check_device(session, program, args, kwargs, device),
                    )
                )
            if aoti:
                steps.append(
                    (aoti_package.STEP, lambda: aoti_package.check_aoti(session, program, args, kwargs))
                )
            if tensorrt:
                steps.append(
                    ("TensorRT dry run", lambda: program_steps.check_tensorrt(session, program, args, kwargs))
                )
                steps.append(
                    (
                        "TensorRT engine build",
                        lambda: program_steps.check_tensorrt_build(session, program, args, kwargs),
                    )
                )
            for step_name, run in steps:
                if program is None:
                    session.skip(step_name, NO_PROGRAM)
                elif step_name in fake_constants.CRASHES and fake_constants.writes_a_fake_constant(program):
                    session.skip(step_name, fake_constants.CRASHES[step_name])
                elif isolate and step_name not in isolated.IN_WORKERS_ALREADY:
                    isolated.run_step(session, step_name, run, time_limit_s=step_time_limit_s)
                else:
                    run()
        module_state.restore_fakes(module, attributes_before)  # what the later steps' exports left
        report.fold_symptoms()
        return report
    finally:
        report.wall_seconds = time.perf_counter() - started  # forks and all


# --------------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------------


def _check_inputs(model: Any, args: Any, kwargs: Any) -> tuple[tuple, dict]:
    if not callable(model):
        raise DoctorUsageError(f"the model must be an nn.Module or a callable, got {type(model).__name__}")
    if isinstance(args, torch.Tensor) or not isinstance(args, tuple | list):
        raise DoctorUsageError(
            f"args must be a tuple of positional inputs, e.g. (x,), got {type(args).__name__}"
        )
    if kwargs is not None and not isinstance(kwargs, dict):
        raise DoctorUsageError(f"kwargs must be a dict of keyword inputs, got {type(kwargs).__name__}")
    return tuple(args), dict(kwargs or {})


def _check_input(index: int, item: Any) -> tuple[str, tuple, dict]:
    """A check input as (label, args, kwargs): an args tuple, or a dict with "args" and "kwargs"."""
    label = f"check input {index}"
    if isinstance(item, dict):
        unknown = set(item) - {"args", "kwargs"}
        if unknown or "args" not in item:
            raise DoctorUsageError(
                f"{label} is a dict with keys {sorted(item)}; it needs 'args' and may have 'kwargs'"
            )
        args, kwargs = item["args"], item.get("kwargs")
    else:
        args, kwargs = item, None
    if isinstance(args, torch.Tensor) or not isinstance(args, tuple | list):
        raise DoctorUsageError(f"{label}: args must be a tuple, e.g. (x,), got {type(args).__name__}")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise DoctorUsageError(f"{label}: kwargs must be a dict, got {type(kwargs).__name__}")
    return label, tuple(args), dict(kwargs or {})


class _ExportErrorInEager(Exception):
    """Eager mode raised an error of the catalog: `torch.while_loop` and `torch.cond` trace their
    bodies with Dynamo even in eager mode, so their rules fail there as they would in export."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


def _eager_in_a_child(model: Callable, inputs: list, time_limit_s: float) -> Forked:
    """The eager runs in a forked child; its value, when it has one, is (outputs, notes).

    The reference is computed where the program will be, in a child running torch on one thread:
    a convolution's sums come out in another order on another number of threads, and a detector's
    boxes then differ from the program's by more than the comparison allows. An error eager raises
    is classified in this process, where its exception is: the parent runs eager again for it."""

    def outputs_and_notes():
        notes: list[str] = []
        return [output for *_, output in _eager_runs(model, inputs, notes, in_child=True)], notes

    return run_forked(outputs_and_notes, timeout_s=time_limit_s)


def _eager_runs(
    model: Callable, inputs: list, notes: list[str], *, in_child: bool = False
) -> list[tuple[str, tuple, dict, Any]]:
    """Eager on each input in turn, on a copy of the model: the reference outputs, call for call,
    from the state the model had when the reader called `diagnose` (which export starts from too).
    A model that cannot be copied runs itself, and `notes` says so."""
    try:
        reference = copy.deepcopy(model)
    except Exception as error:  # an attribute deepcopy refuses (a lock, a tensor that is not a leaf)
        consequence = (
            "in a child process, whose writes stayed there"
            if in_child
            else "so a model that writes its own state was exported from the state eager left"
        )
        notes.append(
            f"the model could not be copied ({first_line(error)}): eager ran on the model itself, {consequence}"
        )
        reference = model
    example_layout = pytree.tree_structure(inputs[0][1:])
    runs = []
    for index, (label, a, k) in enumerate(inputs):
        try:
            output = _eager(reference, a, k, label)
        except DoctorUsageError as error:
            # a check input laid out unlike the example is a call the reader makes: the program's
            # error on it is the finding, not a mistake in the inputs given to the doctor
            if index == 0 or pytree.tree_structure((a, k)) == example_layout:
                raise
            output = program_steps.LaidOutDifferently(first_line(error.__cause__ or error))
        runs.append((label, a, k, output))
    return runs


def _eager(model: Callable, args: tuple, kwargs: dict, label: str) -> Any:
    """The model's output on copies of the inputs: under `torch.no_grad` (less memory, no graph),
    and again with autograd on when that fails, as the reader's own call runs (a `forward` that
    calls `torch.autograd.grad` needs it)."""
    try:
        return run_on_copies(model, args, kwargs)
    except Exception:  # not necessarily the model's fault: the reader's mode, autograd on, decides
        try:
            return run_on_copies(model, args, kwargs, autograd=True)
        except Exception as error:
            # torch.cond and torch.while_loop trace their bodies with Dynamo even in eager mode: an
            # error Dynamo raises there is export's, whether or not the catalog knows it
            if catalog.classify(error, "eager") is not None or isinstance(error, TorchDynamoException):
                raise _ExportErrorInEager(error) from error
            raise DoctorUsageError(
                f"the model raised {first_line(error)} in eager mode on {label}: fix the inputs (or the "
                "model) first; the doctor diagnoses export, not the model"
            ) from error


def _model_name(model: Any) -> str:
    if isinstance(model, torch.nn.Module):
        return type(model).__name__
    return getattr(model, "__qualname__", type(model).__name__)


# --------------------------------------------------------------------------------------------------
# A callable that is not a Module
# --------------------------------------------------------------------------------------------------


class CallableAsModule(torch.nn.Module):
    """An nn.Module whose forward calls a function or a bound method."""

    def __init__(self, function: Callable):
        super().__init__()
        self.function = function
        owner = getattr(function, "__self__", None)
        if isinstance(owner, torch.nn.Module):  # a bound method's model: its parameters become the program's
            self.owner = owner

    def forward(self, *args, **kwargs):
        return self.function(*args, **kwargs)


def wrap_callable(function: Callable) -> torch.nn.Module:
    """A `CallableAsModule` whose ``forward`` has the callable's signature, so that `dynamic_shapes`
    written for the callable's parameters apply unchanged."""

    def forward(self, *args, **kwargs):
        return self.function(*args, **kwargs)

    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a builtin without a signature: dynamic_shapes by position only
        signature = None
    if signature is not None:
        self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
        forward.__signature__ = signature.replace(parameters=[self_parameter, *signature.parameters.values()])
    wrapper = type(f"{_model_name(function)}AsModule", (CallableAsModule,), {"forward": forward})
    return wrapper(function)


def _as_module(session: Session, model: Callable, args: tuple, kwargs: dict, dynamic_shapes: Any):
    if isinstance(model, torch.nn.Module):
        return model
    with session.step("nn.Module check") as record:
        try:
            torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes)
        except Exception as error:
            record.outcome = "failed"
            finding = session.classified(error, "callable", "callable")
            finding.evidence.append(f"the doctor wrapped the {type(model).__name__} in a Module to go on")
            session.add(finding)
        else:
            record.detail = "torch.export accepted the callable as it is"
    return wrap_callable(model)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Keep what PyTorch prints while the doctor works (partial graphs, draft_export's banners, log
    warnings, Python warnings) out of the report's way. PyTorch's log handlers write to whatever
    `sys.stderr` is when they emit, so redirecting it catches them; the loggers are left alone
    (draft_export reads its own structured log)."""
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        yield
