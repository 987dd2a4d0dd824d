"""One entry point from an ``ExportedProgram`` to a compiled callable: :func:`lower`.

Every notebook that compiles a model goes through here so that three promises hold everywhere:

* the backend choice is explained (``Lowered.reason``), because "auto" picks TensorRT only where a
  CUDA GPU and ``torch_tensorrt`` are present and AOTInductor otherwise; any backend of the registry
  (:mod:`casebook.backends.registry`: AOTInductor, TensorRT, ExecuTorch, ONNX Runtime, a saved
  ``ExportedProgram``) can be asked for by name;
* the compiled program is checked against eager ``ep.module()`` on the same inputs before anyone
  looks at a speed-up (a failed check raises, it never passes silently);
* compiled artifacts are cached on disk (see :mod:`casebook.backends.cache`), so rebuilding the
  book does not recompile unchanged models.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .. import REPO_ROOT
from ..inputs import as_args, first_device
from ..parity import REORDERED_ARITHMETIC, ParityResult, assert_parity
from .cache import (
    artifact_path,
    atomic_output,
    cache_key,
    default_cache_dir,
    read_metadata,
    write_metadata,
)
from .registry import BACKENDS as REGISTRY
from .registry import Backend, flat
from .tensorrt.runtime import tensorrt_import_problem

# The backends lower() compiles to: those of the registry that load in this process.
BACKENDS = ("auto", "eager", *(name for name, entry in REGISTRY.items() if entry.load is not None))
_EAGER_NAME = "eager ExportedProgram.module()"
_REMOVED_TRT_SETTINGS = {
    "enabled_precisions": "precision now comes from the model's dtypes (e.g. export a .half() model) "
    "or from enable_autocast=True with autocast_low_precision_type=torch.float16",
    "use_explicit_typing": "strong typing is now always on: precision follows the model's dtypes, "
    "or enable_autocast=True",
}

# (rtol, atol) for compiled-vs-eager: a compiler reorders reductions and fuses kernels
_TOLERANCES = REORDERED_ARITHMETIC
_TRT_FLOAT32 = (1e-2, 1e-2)  # TensorRT uses TF32 for float32 matmul/conv unless disable_tf32=True
_TRT_AUTOCAST_FLOAT32 = (5e-2, 5e-2)  # enable_autocast computes float32 layers in 16 bits


@dataclass
class Lowered:
    """A compiled program, callable like ``ep.module()``, with the story of how it was made."""

    backend: str
    module: Callable[..., Any] = field(repr=False)
    reason: str
    device: str
    compile_seconds: float
    from_cache: bool = False
    artifact_path: Path | None = None
    parity: ParityResult | None = None
    cache_key: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    first_compile_seconds: float | None = None  # recorded when the cached artifact was built

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    def _rows(self) -> list[tuple[str, str]]:
        rows = [
            ("backend", f"{_title(self.backend)} (`{self.backend}`) on {self.device}"),
            ("why", self.reason),
        ]
        rows.append(("time", self._time_text()))
        if self.artifact_path is not None:
            rows.append(("artifact", _display_path(self.artifact_path)))
        if self.settings:
            rows.append(("settings", ", ".join(f"{k}={v!r}" for k, v in self.settings.items())))
        rows.append(("parity", self._parity_text()))
        return rows

    def _parity_text(self) -> str:
        if self.parity is not None:
            return str(self.parity)
        return "n/a (eager is the reference)" if self.backend == "eager" else "not checked"

    def _time_text(self) -> str:
        if self.backend == "eager":
            return f"ep.module() built in {self.compile_seconds:.2f} s (nothing to compile)"
        if not self.from_cache:
            return f"compiled in {self.compile_seconds:.2f} s"
        first = (
            f" (first compile took {self.first_compile_seconds:.1f} s)" if self.first_compile_seconds else ""
        )
        return f"loaded from cache in {self.compile_seconds:.2f} s{first}"

    def __str__(self) -> str:
        return "\n".join(f"{k:>9}: {v}" for k, v in self._rows())

    def _repr_markdown_(self) -> str:
        body = "\n".join(f"| **{k}** | {_escape_cell(v)} |" for k, v in self._rows())
        return "| | |\n|---|---|\n" + body


def lower(
    exported_program: torch.export.ExportedProgram,
    example_inputs: Sequence[Any] | torch.Tensor,
    backend: str = "auto",
    *,
    cache_dir: str | Path | None = None,
    check_parity: bool = True,
    rtol: float | None = None,
    atol: float | None = None,
    parity_inputs: Sequence[Sequence[Any] | torch.Tensor] | None = None,
    **settings: Any,
) -> Lowered:
    """Compile ``exported_program`` with ``backend`` and check it against eager.

    Args:
        exported_program: the program to compile; its weights must be on the inputs' device.
        example_inputs: positional inputs (a tuple, or a single tensor) used to compile and check.
        backend: "auto" (TensorRT if CUDA and torch_tensorrt are usable, else AOTInductor), "eager",
            or a backend of the registry by name: "aoti", "tensorrt", "executorch", "onnx",
            "exported_program" (saved and loaded back).
        cache_dir: where artifacts are cached; defaults to :func:`~.cache.default_cache_dir`.
        check_parity: compare against ``exported_program.module()``; a mismatch raises AssertionError.
        rtol, atol: override the per-dtype tolerances of the parity check.
        parity_inputs: extra input tuples to check on, beyond ``example_inputs``.
        **settings: backend settings: ``torch_tensorrt.dynamo.compile`` keywords for TensorRT,
            ``inductor_configs={...}`` for AOTInductor, ``threads=`` for ONNX Runtime. With "auto",
            settings meant for the backend that was not chosen are ignored (and the reason says so).
    """
    args = as_args(example_inputs)
    _reject_removed_settings(settings)
    device = first_device(args)
    chosen, reason = choose_backend(backend, device)
    own_settings, ignored = _settings_for(chosen, settings, strict=backend != "auto")
    if ignored:
        reason += f" Settings for the other backend were ignored: {', '.join(sorted(ignored))}."
    cache = Path(cache_dir or default_cache_dir())
    if chosen == "eager":
        lowered = _lower_eager(exported_program, args)
    else:
        lowered = _lower_with(REGISTRY[chosen], exported_program, args, own_settings, cache)
    lowered.reason = reason
    if check_parity and chosen != "eager":
        input_sets = [args, *(as_args(p) for p in parity_inputs or ())]
        tolerances = _tolerance_table(chosen, own_settings, rtol, atol)
        reference = exported_program.module()
        if REGISTRY[chosen].flat_outputs:  # the runtime returns a flat list: compare the tensors in order
            reference = flat(reference)
        lowered.parity = assert_parity(reference, lowered, input_sets, tolerances=tolerances)
        print(f"[lower] parity: {lowered.parity}", flush=True)
    return lowered


def choose_backend(backend: str, device: torch.device) -> tuple[str, str]:
    """Resolve "auto" and say why, in a sentence a reader can act on."""
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}: choose one of {BACKENDS}")
    if backend != "auto":
        return backend, f"backend={backend!r} was requested explicitly."
    if not torch.cuda.is_available():
        return "aoti", (
            "TensorRT not used: no CUDA device on this machine (torch.cuda.is_available() is False); "
            f"using AOTInductor on {device.type.upper()}."
        )
    if device.type != "cuda":
        return "aoti", (
            f"TensorRT not used: the example inputs are on {device}, and TensorRT runs only on CUDA "
            f"(move the program and inputs to 'cuda' to use it); using AOTInductor on {device.type.upper()}."
        )
    gpu = torch.cuda.get_device_name(device)
    problem = tensorrt_import_problem()
    if problem:
        return (
            "aoti",
            f"TensorRT not used: torch_tensorrt does not import ({problem}); using AOTInductor on {gpu}.",
        )
    import torch_tensorrt

    return (
        "tensorrt",
        f"Using TensorRT: CUDA device {gpu} is available and torch_tensorrt {torch_tensorrt.__version__} imports.",
    )


def _tolerance_table(
    backend: str, settings: Mapping[str, Any], rtol: float | None, atol: float | None
) -> dict:
    table = dict(_TOLERANCES)
    if backend == "tensorrt" and settings.get("enable_autocast"):
        table[torch.float32] = _TRT_AUTOCAST_FLOAT32
    elif backend == "tensorrt" and not settings.get("disable_tf32"):
        table[torch.float32] = _TRT_FLOAT32
    if rtol is not None or atol is not None:
        table = {d: (r if rtol is None else rtol, a if atol is None else atol) for d, (r, a) in table.items()}
    return table


# --- backends -------------------------------------------------------------------------------


def _lower_eager(ep: torch.export.ExportedProgram, args: tuple) -> Lowered:
    start = time.perf_counter()
    module = ep.module()
    return Lowered("eager", module, "", str(first_device(args)), time.perf_counter() - start)


def _lower_with(
    backend: Backend, ep: torch.export.ExportedProgram, args: tuple, settings: dict, cache_dir: Path
) -> Lowered:
    """Compile with ``backend``'s write into the cache, or load what an earlier call wrote there."""
    device = first_device(args)
    if backend.require is not None:
        backend.require(device)
    elif device.type not in backend.devices:
        raise ValueError(
            f"{backend.title} compiles for {' or '.join(backend.devices)}, but the example inputs are on "
            f"{device}: move the inputs, and the program with torch.export.passes.move_to_device_pass"
        )
    _check_program_device(ep, device)
    key = cache_key(ep, args, backend.name, {**settings, **backend.key_extra})
    return _build_cached(
        backend,
        key,
        device,
        settings,
        cache_dir,
        compile_to=lambda tmp: backend.write(ep, tmp, args, settings),
        load=lambda path: backend.load(path, device, settings),
    )


def _build_cached(
    backend: Backend,
    key: str,
    device: torch.device,
    settings: dict,
    cache_dir: Path,
    compile_to: Callable[[Path], Callable[..., Any] | None],
    load: Callable[[Path], Callable[..., Any]],
) -> Lowered:
    """Load the artifact for ``key`` if cached; otherwise compile it, write it atomically, load it."""
    path = artifact_path(cache_dir, backend.name, key, "." + backend.suffix.rsplit(".", 1)[-1])
    common = {"device": str(device), "cache_key": key, "settings": settings}
    cached = _load_cached(path, load)
    if cached is not None:
        module, seconds = cached
        first = (read_metadata(path) or {}).get("compile_seconds")
        print(f"[lower] {backend.name}: cache hit, loaded {path.name} in {seconds:.2f} s", flush=True)
        return Lowered(
            backend.name,
            module,
            "",
            compile_seconds=seconds,
            from_cache=True,
            artifact_path=path,
            first_compile_seconds=first,
            **common,
        )
    print(
        f"[lower] {backend.name}: compiling with {backend.title} on {device} (not in cache) ...", flush=True
    )
    start = time.perf_counter()
    with atomic_output(path) as tmp:
        module = compile_to(tmp)
    if path.exists():
        module = module or load(path)
        write_metadata(
            path, {"backend": backend.name, "compile_seconds": time.perf_counter() - start, **common}
        )
    elif module is None:
        raise RuntimeError(f"{backend.title} finished without writing {path}")
    seconds = time.perf_counter() - start
    print(f"[lower] {backend.name}: compiled in {seconds:.1f} s", flush=True)
    return Lowered(
        backend.name,
        module,
        "",
        compile_seconds=seconds,
        artifact_path=path if path.exists() else None,
        **common,
    )


def _load_cached(path: Path, load: Callable[[Path], Any]) -> tuple[Any, float] | None:
    """(module, seconds) from the cache, or None; an unloadable artifact is discarded, not trusted."""
    if not path.exists():
        return None
    start = time.perf_counter()
    try:
        return load(path), time.perf_counter() - start
    except Exception as e:  # corrupt or incompatible artifact: recompiling is always safe
        warnings.warn(
            f"Discarding cached artifact {path} that failed to load ({e}); recompiling.", stacklevel=3
        )
        path.unlink(missing_ok=True)
        return None


# --- checks and helpers -----------------------------------------------------------------------


def _reject_removed_settings(settings: Mapping[str, Any]) -> None:
    for name, advice in _REMOVED_TRT_SETTINGS.items():
        if name in settings:
            raise TypeError(f"{name!r} was removed from torch_tensorrt.dynamo.compile in 2.13: {advice}.")


def _settings_for(backend: str, settings: Mapping[str, Any], *, strict: bool) -> tuple[dict, set[str]]:
    """Split settings into those for ``backend`` and the rest (an error unless ``backend`` came from auto).

    A backend whose compiler checks its own keywords (TensorRT: ``settings`` None) takes every setting
    no other backend names."""
    entry = REGISTRY.get(backend)
    if entry is not None and entry.settings is None:
        named_elsewhere = set().union(*(e.settings for e in REGISTRY.values() if e.settings is not None))
        own = {k: v for k, v in settings.items() if k not in named_elsewhere}
    else:
        accepted = entry.settings if entry is not None else frozenset()
        own = {k: v for k, v in settings.items() if k in accepted}
    ignored = set(settings) - set(own)
    if ignored and strict:
        accepted = sorted(entry.settings or ()) if entry is not None else []
        accepted_text = ", ".join(f"{name}=..." for name in accepted) or "no settings"
        raise TypeError(f"backend={backend!r} does not take {sorted(ignored)}; it accepts {accepted_text}.")
    return own, ignored


def _check_program_device(ep: torch.export.ExportedProgram, device: torch.device) -> None:
    """Compilers target one device; weights elsewhere than the inputs fail late and obscurely."""
    for name, value in [*ep.state_dict.items(), *ep.constants.items()]:
        if isinstance(value, torch.Tensor) and value.device.type != device.type:
            raise ValueError(
                f"The program's {name!r} is on {value.device} but the example inputs are on {device}. "
                f"Move the program: `ep = torch.export.passes.move_to_device_pass(ep, {device.type!r})`."
            )


def _escape_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def _title(backend: str) -> str:
    return _EAGER_NAME if backend == "eager" else REGISTRY[backend].title
