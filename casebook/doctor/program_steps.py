"""The checks on an exported program: dimensions, runs against eager, decompositions, save/load,
runtime asserts, custom operators' fake kernels, and the TensorRT dry run."""

from __future__ import annotations

import io
import re

import torch
from torch.testing._internal.optests.generate_tests import OpCheckError
from torch.utils._python_dispatch import TorchDispatchMode

from .. import catalog
from ..introspect import symbol_range
from ..parity import REORDERED_ARITHMETIC, compare_outputs
from . import engine_traps
from .confirm import confirm_serialization_name
from .copies import run_on_copies
from .frames import draft_frames
from .input_variants import check_decomposed_layouts, confirm_like_the_example, with_leaf
from .program_shapes import dim_items, dimension_results, map_dim_specs, requested_dims, size_asserts
from .report import Finding
from .session import Session, first_line

MAX_NOTES = 6
# The part of opcheck's fake-tensor failure that says what differs ("Shapes torch.Size([6, 2]) and ...").
_MISMATCH = re.compile(r"found mismatched tensor metadata: (.*?)(?: \(scroll up.*)?$", re.S)


def _call(program, args, kwargs):
    return run_on_copies(program.module(), args, kwargs)


def check_dims(session: Session, module, program, args, kwargs, dynamic_shapes) -> None:
    with session.step("dynamic dims") as record:
        results = dimension_results(program, requested_dims(module, args, kwargs, dynamic_shapes))
        specialized = [result for result in results if result.static_size is not None]
        for result in results:
            if result.static_size is None:
                want = result.requested
                session.report.notes.append(
                    f"`{want.label}` ({want.spec}) is dynamic: `{result.symbol}` in {result.value_range}"
                )
        if not specialized:
            record.detail = f"{len(results)} requested, all dynamic" if results else "none requested"
            return
        record.outcome = "failed"
        record.detail = f"{len(specialized)} of {len(results)} made static"
        located = locate_specializations(session, module, args, kwargs, dynamic_shapes, specialized)
    for result in specialized:
        want = result.requested
        evidence = [
            f"`{want.label}` was asked to be {want.spec}; the program fixes it to {result.static_size}"
        ]
        if want.example_size in (0, 1):
            evidence.append(
                f"the example's size there is {want.example_size}, and export specializes sizes 0 and 1: "
                "use an example with size ≥ 2"
            )
        evidence += [f"draft_export: fixed at {frame}" for frame in located.get(want.source, [])]
        session.add(Finding.from_entry(catalog.entry("dynamic-dim-specialized"), evidence, "dynamic-dims"))


def locate_specializations(
    session: Session, module, args, kwargs, dynamic_shapes, specialized
) -> dict[str, list]:
    """Re-run draft_export with a named Dim for each specialized dimension: it then records the guards
    that fixed them, with the lines that added them. Sizes 0 and 1 need no search (export fixes them)."""
    from torch.export import Dim
    from torch.export._draft_export import FailureType

    wanted = {(r.requested.leaf, r.requested.dim) for r in specialized if r.requested.example_size > 1}
    if not wanted:
        return {}

    def named(name, leaf, tensor, spec):
        return {d: Dim(f"doctor_{leaf}_{d}") if (leaf, d) in wanted else s for d, s in dim_items(spec)}

    renamed = map_dim_specs(module, args, kwargs, dynamic_shapes, named)
    try:
        program = torch.export.draft_export(module, args, kwargs, dynamic_shapes=renamed)
    except Exception as error:  # the finding stands without the line; say why it is missing
        session.report.notes.append(f"could not locate the line that fixed the size: `{first_line(error)}`")
        return {}
    located: dict[str, list] = {}
    for failure in program._report.failures:
        if failure.failure_type != FailureType.GUARD_ADDED:
            continue
        frames = draft_frames(failure.data.get("user_stack", []))
        for source in failure.data.get("symbol_to_sources", {}).values():
            if frames and frames[0] not in located.setdefault(source, []):
                located[source].append(frames[0])
    return located


class LaidOutDifferently:
    """Eager's place in a run for a check input that eager refuses and that is laid out differently
    from the example (another pytree structure of arguments): a call the reader makes, which the
    program refuses too, and whose error names the layout (`kwarg-mismatch`)."""

    def __init__(self, eager_error: str):
        self.eager_error = eager_error


def check_runs(session: Session, program, inputs: list[tuple[str, tuple, dict, object]]) -> None:
    """Run the program on the example and on each check input, and compare with eager."""
    with session.step("run + parity") as record:
        compared, worst = 0, 0.0
        for label, args, kwargs, expected in inputs:
            if isinstance(expected, LaidOutDifferently):
                _run_laid_out_differently(session, record, program, label, args, kwargs, expected)
                continue
            try:
                actual = _call(program, args, kwargs)
            except Exception as error:
                record.outcome = "failed"
                finding = session.classified(error, "run", "run", context=f"on {label}:")
                _, example_args, example_kwargs, _ = inputs[0]
                confirm_like_the_example(finding, program, (example_args, example_kwargs), (args, kwargs))
                session.add(finding)
                continue
            if label == "the example inputs":
                session.example_output = actual
            try:
                leaves, diff = compare_outputs(expected, actual)
            except AssertionError as error:
                record.outcome = "failed"
                lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
                evidence = [f"on {label}: {lines[0]}"] + lines[1:3]
                session.add(Finding.from_entry(catalog.entry("parity-mismatch"), evidence, "parity", error))
                continue
            except Exception as error:  # the comparison itself could not take the outputs apart
                record.outcome = "failed"
                session.add(
                    session.classified(error, "check", "parity", context=f"comparing outputs on {label}:")
                )
                continue
            compared, worst = compared + 1, max(worst, diff)
        record.detail = f"{compared} of {len(inputs)} input(s) equal to eager" + (
            f", max |diff| {worst:.2g}" if compared else ""
        )


def _run_laid_out_differently(session: Session, record, program, label, args, kwargs, eager) -> None:
    """The program on a check input laid out differently from the example, which eager refused: its
    error is the finding (the call's layout), with eager's refusal beside it."""
    context = f"on {label}, laid out differently from the example inputs (eager raised {eager.eager_error}):"
    try:
        _call(program, args, kwargs)
    except Exception as error:
        record.outcome = "failed"
        session.add(session.classified(error, "run", "run", context=context))
    else:
        session.report.notes.append(
            f"the program ran {label}, which is laid out differently from the example inputs and "
            f"which eager refuses ({eager.eager_error}): compare it with eager by hand"
        )


def check_decompositions(session: Session, program, args, kwargs) -> None:
    """Decompose the program to the core ATen set (what AOTInductor, ExecuTorch and TensorRT take),
    then run the decomposed program on the example and compare it with the program."""
    with session.step("run_decompositions") as record:
        try:
            decomposed = program.run_decompositions()
        except Exception as error:
            record.outcome = "failed"
            session.add(session.classified(error, "decompose", "decompose"))
            return
        if not session.ran_clean:
            record.detail = "decomposed; not run, the program already failed on the example"
            return
        try:
            actual = _call(decomposed, args, kwargs)
        except Exception as error:
            record.outcome = "failed"
            context = "the decomposed program fails where the program ran:"
            session.add(session.classified(error, "run", "decompose", context=context))
            return
        try:
            # Decompositions spell operators in smaller ones: float sums come out in another order
            _, largest = compare_outputs(session.example_output, actual, tolerances=REORDERED_ARITHMETIC)
        except AssertionError as error:
            record.outcome = "failed"
            rtol, atol = REORDERED_ARITHMETIC[torch.float32]
            evidence = [
                "the decomposed program differs from the program beyond reordered arithmetic (float32: "
                f"rtol {rtol:g}, atol {atol:g}): " + str(error).strip().splitlines()[0]
            ]
            session.add(Finding.from_entry(catalog.entry("parity-mismatch"), evidence, "decompose", error))
        except Exception as error:
            if _comparison_failed_on_the_example(session):  # the same outputs: reported once, there
                record.detail = (
                    "the decomposed program ran; its outputs cannot be compared (see run + parity)"
                )
            else:
                record.outcome = "failed"
                context = "comparing the decomposed program's outputs with the program's:"
                session.add(session.classified(error, "check", "decompose", context=context))
        else:
            record.detail = "the decomposed program computes what the program computes on the example" + (
                f" (max |diff| {largest:.2g}: reordered float arithmetic)" if largest else ""
            )
            _run_with_autograd_on(session, record, decomposed, args, kwargs)
            check_decomposed_layouts(session, program, decomposed, args, kwargs)


def _run_with_autograd_on(session: Session, record, decomposed, args, kwargs) -> None:
    """Run the decomposed program once more with autograd on, as a reader's call runs by default,
    when it has parameters that require grad: an in-place write into one of them passes under
    `torch.no_grad` (the doctor's other runs) and raises with autograd on."""
    if not any(parameter.requires_grad for parameter in decomposed.parameters()):
        return
    try:
        run_on_copies(decomposed.module(), args, kwargs, autograd=True)
    except Exception as error:
        record.outcome = "failed"
        context = (
            "the decomposed program fails with autograd on (a reader's default), where it ran under no_grad:"
        )
        session.add(session.classified(error, "run", "decompose", context=context))
    else:
        record.detail += ", and runs with autograd on"


def _comparison_failed_on_the_example(session: Session) -> bool:
    """Whether `run + parity` could not take the example's outputs apart (see `check_runs`)."""
    return any(
        line.startswith("comparing outputs on the example inputs:")
        for finding in session.report.findings
        for line in finding.evidence[:1]
    )


def check_save_load(session: Session, program, args, kwargs) -> None:
    """Save and load the program; the loaded program must compute what the program computed."""
    with session.step("save/load") as record:
        try:
            buffer = io.BytesIO()
            torch.export.save(program, buffer)
            buffer.seek(0)
            loaded = torch.export.load(buffer)
        except Exception as error:
            record.outcome = "failed"
            finding = session.classified(error, "save-load", "save-load")
            confirm_serialization_name(finding, program)
            session.add(finding)
            return
        if not session.ran_clean:
            record.detail = "saved and loaded; not run, the program already failed on the example"
            return
        try:
            actual = _call(loaded, args, kwargs)
            compare_outputs(session.example_output, actual)
        except AssertionError as error:
            record.outcome = "failed"
            evidence = [
                "the loaded program differs from the program before saving: "
                + str(error).strip().splitlines()[0]
            ]
            session.add(Finding.from_entry(catalog.entry("parity-mismatch"), evidence, "save-load", error))
        except Exception as error:
            record.outcome = "failed"
            context = "the loaded program fails where the program before saving ran:"
            session.add(session.classified(error, "run", "save-load", context=context))


def check_runtime_asserts(session: Session, program) -> None:
    with session.step("runtime asserts") as record:
        asserts = size_asserts(program)
        record.detail = f"{len(asserts)} on sizes known only at run time"
    restrictive = [a for a in asserts if (a.lower_bound or 0) >= 2 and a.from_library_kernel]
    if restrictive:
        evidence = [
            f"the program asserts `{found.expression}` on the size returned by {found.operator}"
            + (f" at {found.frame}" if found.frame else "")
            for found in restrictive
        ]
        evidence.append(
            "inputs for which these operators return fewer elements fail with 'Runtime assertion failed'"
        )
        # A run that failed on one of these asserts is explained here: report it once.
        for failed in [f for f in session.report.findings if f.kind == "runtime-assert-failed"]:
            if any(
                f"expression {found.expression} on node" in line
                for found in restrictive
                for line in failed.evidence
            ):
                session.report.findings.remove(failed)
                evidence += ["it fails already: " + " ".join(failed.evidence[:2])]
        session.add(
            Finding.from_entry(catalog.entry("restrictive-runtime-assert"), evidence, "runtime-asserts")
        )
    empty_refused = [a for a in asserts if a.lower_bound == 1 and a.from_library_kernel]
    for found in empty_refused:
        session.report.notes.append(
            f"the program refuses empty results from {found.operator} (it asserts `{found.expression}`): "
            "if that operator can return nothing, its fake kernel should allow it (`min=0`)"
        )
    others = [a for a in asserts if a not in restrictive and a not in empty_refused]
    if others:
        shown = ", ".join(f"`{a.expression}`" for a in others[:MAX_NOTES])
        more = f" and {len(others) - MAX_NOTES} more" if len(others) > MAX_NOTES else ""
        session.report.notes.append(
            f"the program checks at run time {shown}{more}: sizes known only at run time; an input that "
            "breaks one fails with 'Runtime assertion failed'"
        )


# Operators that come with PyTorch (a plain `import torch` defines them): their fake kernels are
# PyTorch's own, not the reader's to fix, and a process that loads a program has them.
BUILTIN_NAMESPACES = {"aten", "prims", "_operator", "debug_mode_ops"}


class _RecordOperatorCalls(TorchDispatchMode):
    """Remember the first call of every operator outside `BUILTIN_NAMESPACES` while a program runs."""

    def __init__(self):
        super().__init__()
        self.calls: dict[torch._ops.OpOverload, tuple[tuple, dict]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if isinstance(func, torch._ops.OpOverload) and func.namespace not in BUILTIN_NAMESPACES:
            self.calls.setdefault(func, (args, kwargs))
        return func(*args, **kwargs)


def check_custom_operators(session: Session, program, args, kwargs) -> None:
    """Compare each custom operator's fake kernel with its real kernel, on the example's own values.

    Export trusts a fake kernel's shapes; a wrong one raises nothing in Python and gives wrong results
    in AOTInductor (the custom-operators page shows it). `torch.library.opcheck`'s fake-tensor test is
    the comparison, run on the arguments the operator received when the program ran on the example.
    """
    custom = sorted(
        {
            str(node.target)
            for node in program.graph.nodes
            if isinstance(node.target, torch._ops.OpOverload)
            and node.target.namespace not in BUILTIN_NAMESPACES
        }
    )
    # What a loading process must import for them: `load_elsewhere` checks it in a fresh process.
    with session.step("custom operators") as record:
        if not custom:
            record.detail = "none in the program"
            return
        if not session.ran_clean:
            record.detail = f"{len(custom)} in the program; not checked, the program failed on the example"
            return
        recorder = _RecordOperatorCalls()
        with recorder:
            _call(program, args, kwargs)
        mismatched, unchecked = [], []
        for op, (op_args, op_kwargs) in recorder.calls.items():
            try:
                torch.library.opcheck(op, op_args, op_kwargs, test_utils="test_faketensor")
            except OpCheckError as error:
                found = _MISMATCH.search(str(error))
                mismatched.append(
                    f"{op}: fake kernel vs kernel: {found.group(1) if found else first_line(error)}"
                )
            except Exception as error:  # the test itself could not run: say so, do not count it as passed
                unchecked.append(f"{op} ({first_line(error)})")
        record.detail = (
            f"{len(recorder.calls)} called on the example, {len(mismatched)} with a wrong fake kernel"
            + (f", {len(unchecked)} not checked" if unchecked else "")
        )
        if mismatched:
            record.outcome = "failed"
    if unchecked:
        session.report.notes.append("fake kernels not checked: " + "; ".join(unchecked))
    if mismatched:
        evidence = mismatched + [
            "export trusts the fake kernel's shapes: code compiled from them (AOTInductor) computes wrong "
            "results; torch.library.opcheck(op, args) repeats the check"
        ]
        session.add(Finding.from_entry(catalog.entry("wrong-fake-kernel"), evidence, "custom operators"))


def check_size_one(session: Session, module, program, args, kwargs, dynamic_shapes) -> None:
    """Run eager and the program at size 1 of each dynamic dimension whose range allows it.

    Export decides `if x.shape[0] == 1:` for the example (size 2 or more) without a guard, so a
    program whose range starts at 1 silently takes the other branch there. Each such dimension is cut
    to 1 (`narrow`) on its own; where both eager and the program run and their outputs differ, the
    branch was lost. Where either raises (another input shares the size), nothing is concluded.
    """
    with session.step("size 1") as record:
        if not session.ran_clean:
            record.detail = "not tried, the program failed on the example"
            return
        results = dimension_results(program, requested_dims(module, args, kwargs, dynamic_shapes))
        candidates = [
            r
            for r in results
            if r.lower_bound is not None and r.lower_bound <= 1 and r.requested.example_size >= 2
        ]
        runnable = program.module() if candidates else None  # unlifted once, for every probe
        differ, inconclusive = [], []
        for result in candidates:
            want = result.requested
            probe_args, probe_kwargs = with_leaf(
                args, kwargs, want.leaf, lambda tensor, dim=want.dim: tensor.narrow(dim, 0, 1)
            )
            try:
                expected = run_on_copies(module, probe_args, probe_kwargs)
                actual = run_on_copies(runnable, probe_args, probe_kwargs)
            except Exception as error:  # another input shares the size: this probe cannot decide
                inconclusive.append(f"`{want.label}` = 1: {first_line(error)}")
                continue
            try:
                compare_outputs(expected, actual)
            except AssertionError as error:
                differ.append(f"`{want.label}` = 1 (its range is {result.value_range}): " + first_line(error))
        record.detail = (
            f"{len(candidates)} dimension(s) whose range includes 1 tried at 1"
            + (f", {len(differ)} differ from eager" if differ else "")
            + (f", {len(inconclusive)} not decided (a run raised)" if inconclusive else "")
        )
        if differ:
            record.outcome = "failed"
    if inconclusive:
        session.report.notes.append("size 1 not decided: " + "; ".join(inconclusive))
    if differ:
        evidence = differ + [
            "export decided a test on this size for the example (size ≥ 2) and kept no guard: at size 1 the "
            "program runs the other branch"
        ]
        session.add(Finding.from_entry(catalog.entry("size-one-branch"), evidence, "size 1"))


def check_tensorrt(session: Session, program, args, kwargs) -> None:
    from ..backends.tensorrt.coverage import CoverageAnalysisError, coverage_report

    if kwargs:
        session.skip("TensorRT dry run", "the dry run takes positional inputs only")
        return
    with session.step("TensorRT dry run") as record:
        try:
            coverage = coverage_report(program, args)
        except CoverageAnalysisError as error:
            record.outcome = "failed"
            session.add(
                Finding.unclassified("the TensorRT dry run failed", [first_line(error)], "tensorrt", error)
            )
            return
        record.detail = (
            f"{coverage.analysis}: {coverage.supported_ops}/{coverage.total_ops} ops convertible, "
            f"{coverage.trt_engine_count} engine(s)"
        )
        if coverage.unsupported_ops:
            record.outcome = "failed"
    if not coverage.unsupported_ops:
        return
    evidence = [
        "no converter: " + ", ".join(f"{op} x{n}" for op, n in coverage.unsupported_ops.items()),
        f"partition: {coverage.trt_engine_count} TensorRT engine(s) of {coverage.trt_block_sizes} ops, "
        f"{coverage.torch_block_count} block(s) left to PyTorch",
    ]
    if coverage.analysis != "tensorrt":
        evidence.append(f"dry run only ({coverage.analysis}): no engine was built")
    session.add(Finding.from_entry(catalog.entry("tensorrt-unsupported-ops"), evidence, "tensorrt"))
    large_topks = engine_traps.large_topks(program, coverage.unsupported_ops)
    if large_topks:
        session.add(Finding.from_entry(catalog.entry("tensorrt-topk-over-3840"), large_topks, "tensorrt"))


# An engine input's profile Torch-TensorRT made up: a size with no upper bound in the program gets
# max = min * 2**12 (torch_tensorrt/dynamo/partitioning/common.py).
_MADE_UP_FACTOR = 2**12


def check_tensorrt_build(session: Session, program, args, kwargs) -> None:
    """Build the program's TensorRT engines for real and report each refused block with its catalog entry,
    and each engine input whose profile Torch-TensorRT made up."""
    from ..backends.tensorrt.engine import (
        EngineBuildError,
        EngineCompileError,
        build_engines,
        installed_distribution,
    )

    if kwargs:
        session.skip("TensorRT engine build", "the build takes positional inputs only")
        return
    if installed_distribution() is None:
        session.skip(
            "TensorRT engine build",
            "no Torch-TensorRT that builds engines here: `make install TENSORRT=rtx` installs Torch-TensorRT "
            "for RTX, which builds them without a GPU",
        )
        return
    with session.step("TensorRT engine build") as record:
        try:
            build = build_engines(program, args)
        except (EngineBuildError, EngineCompileError) as error:
            record.outcome = "failed"
            session.add(
                Finding.unclassified(
                    "the TensorRT engine build failed", [first_line(error)], "tensorrt", error
                )
            )
            return
        record.detail = build.summary()
        if build.failed:
            record.outcome = "failed"
    for block in build.failed:
        error = block.as_exception()
        entry = catalog.classify(error, "tensorrt-build")
        evidence = [f"{block.name} ({block.op_count} ops): {block.error}"]
        if block.failing_node:
            evidence.append(f"at node {block.failing_node[0]} ({block.failing_node[1]})")
        # The builder's line that names the cause (the entry's message), else its first error line.
        builder = block.builder_errors()
        named = [line for line in builder if entry is not None and entry.regex and entry.regex.search(line)]
        evidence += (named or builder)[:1]
        if entry is None:
            session.add(
                Finding.unclassified(f"TensorRT refused block {block.name}", evidence, "tensorrt", error)
            )
        else:
            session.add(Finding.from_entry(entry, evidence, "tensorrt", error))
    made_up = [
        f"{block.name}: {profile}"
        for block in build.engines
        for profile in block.profile
        if not profile.static  # a fixed shape is the program's, even a size 0
        and any(high == low * _MADE_UP_FACTOR for low, high in zip(profile.min, profile.max, strict=True))
        and not _program_range(program, profile)
    ]
    if made_up:
        session.add(Finding.from_entry(catalog.entry("tensorrt-made-up-profile"), made_up, "tensorrt"))
    for entry_id, evidence in [
        ("tensorrt-min-two-lowered", engine_traps.lowered_minimums(program, build)),
        ("tensorrt-kv-cache-strided-write", engine_traps.strided_kv_writes(program, build)),
    ]:
        if evidence:
            session.add(Finding.from_entry(catalog.entry(entry_id), evidence, "tensorrt"))


def _program_range(program, profile) -> bool:
    """Whether each dimension of ``profile`` that looks made up is the range of one of the program's own
    dimensions (a `Dim` that happens to span min to 4096 * min)."""
    bounds = {symbol_range(program, symbol) for symbol in program.range_constraints}
    return all(
        (low, high) in bounds
        for low, high in zip(profile.min, profile.max, strict=True)
        if high == low * _MADE_UP_FACTOR
    )
