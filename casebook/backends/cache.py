"""On-disk cache of compiled artifacts, so rebuilding the book does not recompile unchanged models.

An artifact is keyed by everything that can change what the compiler produces: the program's code
and signature, the bytes of its weights and constants, the fake (shape) kernels registered for the
custom operators it calls, the example inputs' shapes/dtypes/devices, the backend, its settings, and
the versions of the compilers and the hardware they target. Anything left out of the key would let a
stale artifact be served silently, so when in doubt it goes in.

The cache lives in ``<repo>/.artifacts/compiled`` (git-ignored). Set ``CASEBOOK_ARTIFACT_DIR`` to
move the artifact root elsewhere; compiled artifacts then go to ``$CASEBOOK_ARTIFACT_DIR/compiled``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import inspect
import io
import json
import marshal
import os
import platform
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch.utils import _pytree as pytree

from .. import REPO_ROOT
from ..inputs import first_device

ARTIFACT_DIR_ENV = "CASEBOOK_ARTIFACT_DIR"


def default_cache_dir() -> Path:
    """Where compiled artifacts go unless the caller says otherwise."""
    root = os.environ.get(ARTIFACT_DIR_ENV)
    base = Path(root).expanduser() if root else REPO_ROOT / ".artifacts"
    return base / "compiled"


def cache_key(
    exported_program: torch.export.ExportedProgram,
    example_inputs: Sequence[Any],
    backend: str,
    settings: Mapping[str, Any] | None = None,
) -> str:
    """Return the sha256 hex digest identifying one (program, inputs, backend, settings) compile."""
    h = hashlib.sha256()
    _update_program(h, exported_program)
    _update_text(h, "fake_kernels", stable_repr(custom_fake_kernels(exported_program)))
    _update_text(h, "inputs", input_signature(example_inputs))
    _update_text(h, "backend", backend)
    _update_text(h, "settings", stable_repr(dict(settings or {})))
    _update_text(h, "toolchain", stable_repr(toolchain_versions(backend, example_inputs)))
    return h.hexdigest()


def artifact_path(cache_dir: str | os.PathLike[str], backend: str, key: str, suffix: str = ".pt2") -> Path:
    """Path of the artifact for ``key``; the backend prefix keeps the folder readable."""
    return Path(cache_dir) / f"{backend}-{key[:32]}{suffix}"


def metadata_path(artifact: Path) -> Path:
    """Sidecar JSON next to an artifact, recording how it was built."""
    return artifact.with_suffix(".json")


@contextlib.contextmanager
def atomic_output(final_path: Path) -> Iterator[Path]:
    """Yield a temporary path in the same folder; rename it onto ``final_path`` only on success.

    A crash or an interrupted compile then never leaves a half-written artifact that a later build
    would load. The temporary name keeps the final suffix because some writers (AOTInductor) check it.
    If the body wrote nothing, nothing is renamed.
    """
    final_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = final_path.with_name(
        f".{final_path.stem}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp{final_path.suffix}"
    )
    try:
        yield tmp
        if tmp.exists():
            os.replace(tmp, final_path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_metadata(artifact: Path, metadata: Mapping[str, Any]) -> None:
    """Atomically write the sidecar JSON for ``artifact``."""
    target = metadata_path(artifact)
    with atomic_output(target) as tmp:
        tmp.write_text(json.dumps(dict(metadata), indent=2, sort_keys=True, default=str))


def read_metadata(artifact: Path) -> dict[str, Any] | None:
    """The sidecar JSON for ``artifact``, or None if it is missing or unreadable."""
    try:
        return json.loads(metadata_path(artifact).read_text())
    except (OSError, ValueError):
        return None


def input_signature(example_inputs: Sequence[Any]) -> str:
    """Shapes, dtypes, devices (and the nesting) of the inputs; values do not matter to a compiler."""
    leaves, spec = pytree.tree_flatten(example_inputs)
    described = [_describe_leaf(leaf) for leaf in leaves]
    return f"{spec}|{described}"


def toolchain_versions(backend: str, example_inputs: Sequence[Any] = ()) -> dict[str, str]:
    """Compiler versions and target hardware: compiled code is only valid for these."""
    versions = {"torch": torch.__version__, "machine": platform.machine()}
    device = first_device(example_inputs)
    if device.type == "cuda":
        versions["cuda"] = str(torch.version.cuda)
        versions["gpu"] = torch.cuda.get_device_name(device)
        versions["capability"] = str(torch.cuda.get_device_capability(device))
    else:
        versions["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        # The compiler traces the program again, and a convolution's fake kernel asks these switches
        # which CPU algorithm eager would pick; with either on it bounds the batch below 16
        # (book/shipping/aotinductor_cpp.md), so they change the compiled program.
        versions["mkldnn_enabled"] = str(torch._C._get_mkldnn_enabled())
        versions["nnpack_enabled"] = str(torch._C._get_nnpack_enabled())
    if backend == "tensorrt":
        versions.update(_tensorrt_versions())
    return versions


# Op namespaces whose fake kernels ship with torch itself, so torch's version (in the key) pins them.
_TORCH_OP_NAMESPACES = frozenset({"aten", "prims"})


def custom_fake_kernels(exported_program: torch.export.ExportedProgram) -> dict[str, str]:
    """For each custom operator the program calls, the fake kernel registered for it right now.

    Compilers trace the program again (AOTInductor, Torch-TensorRT), and for a custom operator the
    shapes they see come from its fake kernel: the one its library registered, or an override such
    as `casebook.patches.torchvision.nms_fake`. A different fake kernel can compile to a different
    artifact (another runtime assertion on an output size, for one), so the key names the kernel in
    force: ``"module.qualname sha256:<source hash>"``, or ``"none registered"``.
    """
    kernels = {}
    for module in exported_program.graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            target = node.target
            if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
                continue
            if target.namespace in _TORCH_OP_NAMESPACES:
                continue
            # FakeTensor looks the kernel up under OpOverload.name() ("torchvision::nms"); get(),
            # unlike find(), does not create an empty entry as a side effect.
            entry = torch._library.simple_registry.singleton.get(target.name())
            kernel = entry.fake_impl.kernel if entry is not None else None
            kernels[target.name()] = "none registered" if kernel is None else _identify_fake(kernel.func)
    return kernels


def _identify_fake(func: Any) -> str:
    """``"module.qualname sha256:<hash of its source>"`` of the function behind a registered fake kernel."""
    function = _unwrap_fake(func)
    name = f"{getattr(function, '__module__', '?')}.{getattr(function, '__qualname__', type(function).__qualname__)}"
    if name.startswith("torch.library."):
        raise RuntimeError(
            f"cannot identify the fake kernel behind {name}: torch.library wraps it in a way "
            "casebook.backends.cache._unwrap_fake does not know, so the cache key would not tell two "
            "fake kernels apart. Teach _unwrap_fake to reach the function this torch version wraps."
        )
    return f"{name} sha256:{hashlib.sha256(_source_bytes(function)).hexdigest()}"


def _unwrap_fake(func: Any) -> Any:
    """The user's fake function, without the wrappers torch.library puts around it."""
    func = inspect.unwrap(func)
    # register_fake wraps a fake registered from outside torchvision in
    # torch.library._check_pystubs_once's ``inner`` (no functools.wraps): the fake is its ``func`` cell.
    code = getattr(func, "__code__", None)
    if (
        getattr(func, "__module__", None) == "torch.library"
        and code is not None
        and "func" in code.co_freevars
    ):
        return _unwrap_fake(func.__closure__[code.co_freevars.index("func")].cell_contents)
    return func


def _source_bytes(function: Any) -> bytes:
    """The function's source; its bytecode where no source file exists (e.g. built with exec)."""
    try:
        return inspect.getsource(function).encode()
    except (OSError, TypeError):
        code = getattr(function, "__code__", None)
        if code is None:
            raise TypeError(
                f"cannot hash fake kernel {function!r}: it has neither Python source nor bytecode. "
                "Register a plain Python function with torch.library.register_fake."
            ) from None
        return marshal.dumps(code)


def stable_repr(obj: Any) -> str:
    """A repr that does not depend on dict/set ordering, so equal settings give equal keys."""
    if isinstance(obj, Mapping):
        items = sorted((stable_repr(k), stable_repr(v)) for k, v in obj.items())
        return "{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"
    if isinstance(obj, set | frozenset):
        return "{" + ", ".join(sorted(stable_repr(x) for x in obj)) + "}"
    if isinstance(obj, list | tuple):
        return type(obj).__name__ + "(" + ", ".join(stable_repr(x) for x in obj) + ")"
    if isinstance(obj, torch.Tensor):
        return _describe_leaf(obj)
    if isinstance(obj, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
        return str(obj)  # e.g. "aten.add.Tensor"
    if callable(obj) and hasattr(obj, "__qualname__"):
        return f"{getattr(obj, '__module__', '')}.{obj.__qualname__}"
    return repr(obj)


def _update_text(h: Any, tag: str, text: str) -> None:
    """Feed a tagged, length-prefixed string so adjacent fields cannot run into each other."""
    data = text.encode()
    h.update(f"{tag}:{len(data)}:".encode())
    h.update(data)


def _update_program(h: Any, ep: torch.export.ExportedProgram) -> None:
    """Hash the program's code (every submodule, for control flow), signature, and tensors."""
    for name, module in ep.graph_module.named_modules():
        if isinstance(module, torch.fx.GraphModule):
            _update_text(h, f"code[{name}]", module.code)
    _update_text(h, "signature", str(ep.graph_signature))
    _update_text(h, "call_spec", str(ep.call_spec))
    _update_text(
        h, "range_constraints", stable_repr({str(k): str(v) for k, v in ep.range_constraints.items()})
    )
    for group, tensors in (("state_dict", ep.state_dict), ("constants", ep.constants)):
        for name in sorted(tensors):
            _update_text(h, f"{group}[{name}]", _describe_leaf(tensors[name]))
            _update_value_bytes(h, tensors[name])


def _update_value_bytes(h: Any, value: Any) -> None:
    """Hash a tensor's raw bytes (fast path), or its serialized form for anything exotic."""
    if isinstance(value, torch.Tensor):
        try:
            raw = value.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
            h.update(memoryview(raw.numpy()))
            return
        except (RuntimeError, TypeError):
            pass  # quantized, sparse, meta, ...: fall back to torch.save below
        buffer = io.BytesIO()
        torch.save(value.detach().cpu(), buffer)
        h.update(buffer.getvalue())
    else:
        _update_text(h, "object", f"{type(value).__qualname__}:{value!r}")


def _describe_leaf(leaf: Any) -> str:
    if isinstance(leaf, torch.Tensor):
        return f"Tensor({tuple(leaf.shape)}, {leaf.dtype}, {leaf.device}, {leaf.layout})"
    return f"{type(leaf).__name__}({leaf!r})"


def _tensorrt_versions() -> dict[str, str]:
    """Installed torch_tensorrt / TensorRT distributions: engines built by one do not load in another.

    Read from package metadata rather than by importing, which is slow and fails loudly without GPU libs.
    """
    found = {}
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name.startswith(("tensorrt", "torch-tensorrt")):
            found[name] = dist.version
    return found or {"torch-tensorrt": "not installed"}
