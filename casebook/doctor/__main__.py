"""``python -m casebook.doctor FILE.py:FACTORY [--json] [--aoti] [--device D] [--tensorrt]``: the doctor from a shell.

``FACTORY()`` returns a dict with the keys ``model`` and ``args`` and optionally ``kwargs``,
``dynamic_shapes`` and ``check_inputs`` (more inputs to run the exported program on). Exit codes: 0 when the program exports and runs clean, 1 when there are
findings, 2 for a usage error (printed as one line that says what to fix).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

USAGE = "python -m casebook.doctor FILE.py:FACTORY [--json] [--aoti] [--device D] [--tensorrt] [--strict] [--no-compare] [--no-draft] [--no-isolate] [--step-time-limit S]"
KEYS = {"model", "args", "kwargs", "dynamic_shapes", "check_inputs"}
EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """What the reader must change in the command or the factory, in one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own errors, as one line with the usage
        raise UsageError(f"{message}; usage: {USAGE}")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m casebook.doctor", usage=USAGE, description=__doc__.split("\n\n")[0])
    parser.add_argument("target", help="FILE.py:FACTORY, a function returning {'model': ..., 'args': (...)}")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--aoti",
        action="store_true",
        help="add an AOTInductor package and what it refuses, checks on and off",
    )
    parser.add_argument(
        "--device",
        metavar="D",
        help="the device the program will run on (cuda, ...): move it there and run it; "
        "meta stands in for a device this machine lacks",
    )
    parser.add_argument(
        "--tensorrt", action="store_true", help="add Torch-TensorRT's dry run and a real engine build"
    )
    parser.add_argument("--strict", action="store_true", help="export in strict mode (TorchDynamo)")
    parser.add_argument("--no-compare", action="store_true", help="on failure, do not try the other mode")
    parser.add_argument("--no-draft", action="store_true", help="on failure, do not run draft_export")
    parser.add_argument(
        "--no-isolate",
        action="store_true",
        help="run every step in this process (for a debugger); a torch crash then ends the doctor",
    )
    parser.add_argument(
        "--step-time-limit",
        type=_positive_seconds,
        default=1800,
        metavar="S",
        help="seconds a step may run before it is stopped and reported (default 1800)",
    )
    return parser


def _positive_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 < seconds < math.inf:
        raise argparse.ArgumentTypeError(f"expected a positive, finite number of seconds, got {text!r}")
    return seconds


def load_factory(target: str):
    """The function named by ``FILE.py:FACTORY``, imported from that file."""
    path_text, colon, name = target.rpartition(":")
    if not colon or not path_text or not name:
        raise UsageError(f"expected FILE.py:FACTORY (e.g. models/net.py:make_example), got {target!r}")
    path = Path(path_text)
    if not path.is_file():
        raise UsageError(f"no such file: {path_text}")
    if path.suffix != ".py":
        raise UsageError(f"{path_text} is not a Python file (.py)")
    spec = importlib.util.spec_from_file_location(f"doctor_target_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.resolve().parent))  # so the file can import its neighbours
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        raise UsageError(
            f"importing {path_text} raised {type(error).__name__}: {_one_line(error)}"
        ) from error
    if not hasattr(module, name):
        defined = sorted(
            n
            for n, v in vars(module).items()
            if callable(v) and getattr(v, "__module__", "") == module.__name__
        )
        raise UsageError(
            f"{path_text} defines no {name!r}; functions it defines: {', '.join(defined) or 'none'}"
        )
    factory = getattr(module, name)
    if not callable(factory):
        raise UsageError(f"{name!r} in {path_text} is a {type(factory).__name__}, not a function")
    return factory


def call_factory(factory) -> dict[str, Any]:
    """Call the factory and check what it returned."""
    name = getattr(factory, "__name__", "factory")
    try:
        spec = factory()
    except Exception as error:
        raise UsageError(f"{name}() raised {type(error).__name__}: {_one_line(error)}") from error
    if not isinstance(spec, dict):
        raise UsageError(
            f"{name}() returned a {type(spec).__name__}; it must return a dict with the keys 'model' and "
            "'args' (optionally 'kwargs', 'dynamic_shapes', 'check_inputs')"
        )
    missing = sorted({"model", "args"} - spec.keys())
    unknown = sorted(spec.keys() - KEYS, key=str)
    if missing or unknown:
        problems = ([f"lacks {', '.join(map(repr, missing))}"] if missing else []) + (
            [f"has unknown key(s) {', '.join(map(repr, unknown))}"] if unknown else []
        )
        raise UsageError(
            f"the dict {name}() returned {' and '.join(problems)}; allowed keys: {', '.join(sorted(KEYS))}"
        )
    return spec


def _one_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else "(no message)"


def main(argv: Sequence[str] | None = None) -> int:
    stderr = sys.stderr  # the doctor silences stderr while it works; progress goes here
    try:
        options = _parser().parse_args(argv)
        spec = call_factory(load_factory(options.target))
        from casebook.doctor import DoctorUsageError, diagnose

        def progress(step):
            timing = f" ({step.seconds:.1f} s)" if step.outcome != "not run" else ""
            detail = f": {step.detail}" if step.detail else ""
            print(f"  {step.name}: {step.outcome}{timing}{detail}", file=stderr, flush=True)

        print(f"doctor: diagnosing {options.target}", file=stderr, flush=True)
        try:
            report = diagnose(
                spec["model"],
                spec["args"],
                spec.get("kwargs"),
                spec.get("dynamic_shapes"),
                strict=options.strict,
                compare=not options.no_compare,
                draft=not options.no_draft,
                check_inputs=spec.get("check_inputs", ()),
                aoti=options.aoti,
                device=options.device,
                tensorrt=options.tensorrt,
                progress=progress,
                isolate=not options.no_isolate,
                step_time_limit_s=options.step_time_limit,
            )
        except DoctorUsageError as error:
            raise UsageError(str(error)) from error
    except UsageError as error:
        print(f"doctor: error: {error}", file=stderr)
        return EXIT_USAGE
    print(report.to_json() if options.json else report)
    return EXIT_CLEAN if report.ok else EXIT_FINDINGS


if __name__ == "__main__":
    sys.exit(main())
