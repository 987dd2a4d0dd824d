"""Run an AOTInductor package with the book's C++ program, ``cpp/run_aoti``, and read its outputs back.

``make build`` (or ``make runner``) compiles the program into ``_build/cpp/run_aoti`` against the
installed torch wheel. :func:`run_cpp` hands it a package and the flattened inputs, both as files, and
returns what it printed, its exit code and the outputs it wrote: the same tensors a C++ service would
get, flat, without Python's nesting of lists and dicts.
"""

from __future__ import annotations

import os
import re
import subprocess
import sysconfig
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils import _pytree as pytree

from .. import REPO_ROOT

RUNNER = REPO_ROOT / "_build" / "cpp" / "run_aoti"
SOURCE = REPO_ROOT / "cpp" / "run_aoti"

EXIT_CODES = {
    0: "ran",
    2: "usage",
    3: "the package did not load",
    4: "the inputs file did not load",
    5: "the model refused the inputs",
    6: "an operator library did not load",
}
"""What each exit code of ``run_aoti`` means (its ``main.cpp`` says the same)."""


@dataclass(frozen=True)
class CppRun:
    """One run of ``run_aoti``: exit code, what it printed, and its outputs (None unless it ran)."""

    returncode: int
    stdout: str
    stderr: str
    outputs: tuple[torch.Tensor, ...] | None

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def error(self) -> str:
        """The program's own diagnosis (its ``run_aoti:`` lines), or ``""`` when it ran."""
        if self.ok:
            return ""
        lines = self.stderr.splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith("run_aoti:")), None)
        if start is None:
            return f"exit code {self.returncode} ({EXIT_CODES.get(self.returncode, 'crashed')}), no message"
        return "\n".join(lines[start:])

    @property
    def timings_ms(self) -> dict[str, float]:
        """The program's own timings: ``load`` and first ``run``; ``median`` and ``min`` with ``repeat``."""
        found = {}
        if match := re.search(r"loaded in ([\d.]+) ms, ran in ([\d.]+) ms", self.stdout):
            found["load"], found["run"] = float(match[1]), float(match[2])
        if match := re.search(r"median ([\d.]+) ms, min ([\d.]+) ms", self.stdout):
            found["median"], found["min"] = float(match[1]), float(match[2])
        return found

    def __str__(self) -> str:
        meaning = EXIT_CODES.get(self.returncode, "crashed")
        return f"exit code {self.returncode} ({meaning})\n" + (self.stdout.strip() if self.ok else self.error)


def runner_path() -> Path:
    """The compiled ``run_aoti``; a clear error saying how to build it if it is not there."""
    if not RUNNER.is_file():
        raise FileNotFoundError(
            f"the C++ runner is not built: no {RUNNER.relative_to(REPO_ROOT)}. Build it with `make runner` "
            f"(`make build` does it too); it compiles {SOURCE.relative_to(REPO_ROOT)} with CMake and g++."
        )
    return RUNNER


def dynamic_section(library: str | os.PathLike[str]) -> dict[str, list[str]]:
    """The shared libraries an ELF file names (``needed``) and where it looks for them (``runpath``).

    What ``readelf -d`` prints, reduced to the two entries that decide whether a library loads.
    """
    path = Path(library)
    if not path.is_file():
        raise FileNotFoundError(f"no file at {path}")
    completed = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True)
    if completed.returncode != 0:
        raise ValueError(
            f"{path.name} is not an ELF shared library or executable: {completed.stderr.strip()}"
        )
    entries: dict[str, list[str]] = {"needed": [], "runpath": []}
    for line in completed.stdout.splitlines():
        value = line.partition("[")[2].rstrip("]")
        if "(NEEDED)" in line:
            entries["needed"].append(value)
        elif "(RUNPATH)" in line or "(RPATH)" in line:
            entries["runpath"] += value.split(":")
    return entries


def resolved_libraries(executable: str | os.PathLike[str]) -> dict[str, Path | None]:
    """Every shared library the loader would load for ``executable``, direct or indirect, and its file.

    What ``ldd`` prints: a name the loader cannot find maps to None. The kernel's virtual library
    (``linux-vdso``), which has no file, is left out.
    """
    path = Path(executable)
    if not path.is_file():
        raise FileNotFoundError(f"no file at {path}")
    completed = subprocess.run(["ldd", str(path)], capture_output=True, text=True)
    if completed.returncode != 0 or "not a dynamic executable" in completed.stdout + completed.stderr:
        raise ValueError(f"{path.name} is not a dynamically linked ELF file: {completed.stderr.strip()}")
    found: dict[str, Path | None] = {}
    for line in completed.stdout.splitlines():
        name, arrow, rest = line.strip().partition(" => ")
        if name.startswith("linux-vdso"):
            continue
        if not arrow:  # the loader itself: "/lib64/ld-linux-x86-64.so.2 (0x...)"
            name = name.split(" (")[0]
            found[Path(name).name] = Path(name).resolve()
        elif rest.startswith("not found"):
            found[name] = None
        else:
            found[name] = Path(rest.split(" (")[0]).resolve()
    return found


def python_shared_library() -> Path:
    """This interpreter's ``libpython3.X.so``: what a library linked to ``libtorch_python`` needs."""
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        raise FileNotFoundError(
            "this Python is linked statically (Py_ENABLE_SHARED is 0), so there is no libpython shared "
            "library to load; use a Python built with --enable-shared (pyenv: PYTHON_CONFIGURE_OPTS=--enable-shared)"
        )
    path = Path(sysconfig.get_config_var("LIBDIR")) / sysconfig.get_config_var("LDLIBRARY")
    if not path.is_file():
        raise FileNotFoundError(f"Python says its shared library is {path}, but there is no such file")
    return path


def run_cpp(
    package: str | os.PathLike[str],
    inputs: Sequence[object] | torch.Tensor,
    *,
    libraries: Sequence[str | os.PathLike[str]] = (),
    library_path: Sequence[str | os.PathLike[str]] = (),
    check_inputs: bool = True,
    threads: int | None = None,
    repeat: int = 0,
    timeout_s: float = 300,
) -> CppRun:
    """Run ``package`` with ``run_aoti`` on ``inputs`` (any nesting of tensors; flattened in order).

    ``libraries`` are opened first, in order (``--load-library``), to register custom operators;
    ``library_path`` folders go in front of ``LD_LIBRARY_PATH``, where the loader looks for those
    libraries' own dependencies. ``check_inputs=False`` runs with ``AOTI_RUNTIME_CHECK_INPUTS=0``: the
    package then checks nothing about the inputs it is given, the way AOTInductor runs by default.
    ``threads`` sets libtorch's thread count in the program; ``repeat`` times that many more runs
    (see :attr:`CppRun.timings_ms`).
    """
    for name, value, least in (("threads", threads, 1), ("repeat", repeat, 0)):
        if value is not None and (not isinstance(value, int) or value < least):
            raise ValueError(f"{name} must be a whole number >= {least}, got {value!r}")
    leaves = pytree.tree_leaves(inputs)
    if not leaves or not all(isinstance(leaf, torch.Tensor) for leaf in leaves):
        kinds = sorted({type(leaf).__name__ for leaf in leaves}) or ["nothing"]
        raise TypeError(f"run_cpp needs the program's input tensors; the inputs hold {', '.join(kinds)}")
    runner = runner_path()
    with tempfile.TemporaryDirectory(prefix="run_aoti-") as folder:
        inputs_file, outputs_file = Path(folder) / "inputs.pt", Path(folder) / "outputs.pt"
        # clone() keeps each tensor's memory layout (channels-last, a transposed view's strides):
        # the program gets the tensors as given, and the file holds only their own elements.
        torch.save([leaf.detach().clone() for leaf in leaves], inputs_file)
        env = {**os.environ, "AOTI_RUNTIME_CHECK_INPUTS": "1" if check_inputs else "0"}
        if library_path:
            folders = [str(folder) for folder in library_path]
            env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [*folders, env.get("LD_LIBRARY_PATH", "")]))
        options = [arg for library in libraries for arg in ("--load-library", str(library))]
        options += ["--threads", str(threads)] if threads else []
        options += ["--repeat", str(repeat)] if repeat else []
        completed = subprocess.run(
            [str(runner), *options, str(package), str(inputs_file), str(outputs_file)],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout_s,
        )
        outputs = tuple(torch.load(outputs_file)) if completed.returncode == 0 else None
    return CppRun(completed.returncode, completed.stdout, completed.stderr, outputs)
