"""TensorRT's other way in: its ONNX parser builds an engine from an ``.onnx`` file, `build_from_onnx`.

Torch-TensorRT partitions an ``ExportedProgram`` and leaves what TensorRT cannot take to PyTorch.
An ONNX file has no PyTorch left in it: TensorRT's ONNX parser must import every node, or there is no
engine. `build_from_onnx` runs that route with TensorRT for RTX's own Python API, which parses and
builds on a machine without a GPU (no stand-in needed), in a subprocess, and reports the parser's
errors (node, operator, message) or the engine it built. Running the engine needs an RTX GPU.

An ONNX file keeps a dynamic dimension as a name without its range, so a dynamic input needs its
optimization profile here (`Profile` from `casebook.backends.tensorrt.engine`), keyed by the file's input
name; without one, TensorRT's builder refuses the network.
"""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .engine import EngineBuildError, Profile, TensorRTForRTXMissingError, rtx_site, run_worker

WORKER_MODULE = "casebook.backends.tensorrt._onnx_worker"


@dataclass(frozen=True)
class ParserError:
    """One node TensorRT's ONNX parser could not import."""

    code: str
    node: int
    node_name: str
    operator: str
    description: str

    def __str__(self) -> str:
        return f"node {self.node} ({self.operator}, {self.node_name}): {self.code}: {self.description}"


@dataclass(frozen=True)
class OnnxEngineBuild:
    """What TensorRT's ONNX parser and builder made of one file."""

    onnx_path: Path
    tensorrt: str
    parsed: bool
    parser_errors: tuple[ParserError, ...]
    inputs: dict[str, list[int]]
    layers: int
    engine_path: Path | None
    engine_bytes: int | None
    builder_errors: tuple[str, ...]
    seconds: float
    plugin_creators: tuple[str, ...] = ()  # "name version" of each creator in TensorRT's plugin registry

    @property
    def built(self) -> bool:
        return self.engine_path is not None

    def __str__(self) -> str:
        head = f"TensorRT for RTX {self.tensorrt}, {self.onnx_path.name}: "
        if not self.parsed:
            return (
                head
                + f"not parsed, {len(self.parser_errors)} error(s)\n"
                + "\n".join(f"  {e}" for e in self.parser_errors)
            )
        if not self.built:
            return (
                head
                + f"parsed ({self.layers} layers), engine NOT built\n"
                + "\n".join(f"  {m}" for m in self.builder_errors)
            )
        return (
            head + f"parsed ({self.layers} network layers), engine built in {self.seconds:.1f} s: "
            f"{self.engine_path.name}, {self.engine_bytes / 1e6:.1f} MB"
        )


def build_from_onnx(
    onnx_path: str | os.PathLike[str],
    *,
    profiles: Mapping[str, Profile] | None = None,
    engine_path: str | os.PathLike[str] | None = None,
    timeout_s: float = 600,
) -> OnnxEngineBuild:
    """Parse ``onnx_path`` with TensorRT for RTX's ONNX parser and, if it parses, build its engine.

    ``profiles`` maps the file's input names to their `Profile` (needed for each dynamic input).
    The engine goes to ``engine_path`` (default: next to the ONNX file, ``.engine``). A file that
    does not parse, or a network the builder refuses, is a result (``parsed``/``built`` False, with
    the errors), not an exception: showing it is the point.
    """
    onnx_path = Path(onnx_path).resolve()
    if not onnx_path.is_file():
        raise FileNotFoundError(
            f"no ONNX file at {onnx_path}: write one with torch.onnx.export(...).save(path)"
        )
    if not (rtx_site() / "tensorrt_rtx").is_dir() and importlib.util.find_spec("tensorrt_rtx") is None:
        raise TensorRTForRTXMissingError(
            f"the tensorrt_rtx module (TensorRT for RTX) is not in {rtx_site()} nor in this environment. "
            "Install it with `make install TENSORRT=rtx` (the default on a machine without a GPU)."
        )
    specs = {}
    for name, profile in (profiles or {}).items():
        if not isinstance(profile, Profile):
            raise TypeError(
                f"profiles[{name!r}] must be a casebook.backends.tensorrt.engine.Profile, got {profile!r}"
            )
        specs[name] = [list(profile.min), list(profile.opt), list(profile.max)]
    engine_path = Path(engine_path).resolve() if engine_path else onnx_path.with_suffix(".engine")
    with tempfile.TemporaryDirectory(prefix="casebook-trt-onnx-") as tmp:
        tmp_dir = Path(tmp)
        request = {"onnx": str(onnx_path), "profiles": specs, "engine": str(engine_path)}
        (tmp_dir / "request.json").write_text(json.dumps(request))
        result, stderr = run_worker(WORKER_MODULE, tmp_dir, timeout_s, path=[str(rtx_site())])
    if not result["ok"]:
        raise EngineBuildError(
            f"the ONNX build failed: {result['error_type']}: {result['message']}",
            stderr_tail=result.get("traceback", "") + "\n" + stderr[-3000:],
        )
    unknown = set(specs) - set(result["inputs"]) if result["parsed"] else set()
    if unknown:
        raise ValueError(
            f"profiles name inputs the file does not have: {sorted(unknown)}; its inputs are {sorted(result['inputs'])}"
        )
    return OnnxEngineBuild(
        onnx_path=onnx_path,
        tensorrt=result["tensorrt"],
        parsed=result["parsed"],
        parser_errors=tuple(ParserError(**e) for e in result["parser_errors"]),
        inputs=result["inputs"],
        layers=result["layers"],
        engine_path=Path(result["engine"]) if result["engine"] else None,
        engine_bytes=result["engine_bytes"],
        builder_errors=tuple(result["builder_errors"]),
        seconds=result["seconds"],
        plugin_creators=tuple(result["plugin_creators"]),
    )
