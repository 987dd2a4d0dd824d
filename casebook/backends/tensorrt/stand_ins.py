"""What Torch-TensorRT needs stood in to build real TensorRT for RTX engines on a machine without a GPU.

TensorRT for RTX builds engines ahead of time on the CPU ("CPU-only AOT", on by default): its builder
turns a network into serialized engine bytes with no GPU present. Torch-TensorRT, though, was written
for a machine with one. It asks CUDA about the device while importing, deserializes each engine right
after building it (to read which outputs alias inputs), and loads the engine into its runtime module.
Each of those steps needs a GPU. The stand-ins below replace exactly those steps and nothing else:
the graph lowering, the converters, the partition and the engine build are Torch-TensorRT's and
TensorRT for RTX's own, and the engine bytes are what TensorRT for RTX's builder returned.

They are installed only in the build worker (`casebook.backends.tensorrt._build_worker`), a process of its
own, never in a notebook's process. Each one is a `StandIn` record, so a page can print what was stood
in and why (`describe`), and the tests check each one (`tests/test_trt_stand_ins.py`).

What the stand-ins make impossible, on purpose: running an engine. An engine built here has never been
loaded; running it needs an RTX GPU (TensorRT for RTX does not run on data-center GPUs such as the
H100), where TensorRT for RTX also compiles its kernels at first run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# An RTX part (Ada, SM 8.9). Torch-TensorRT reads the capability only to tell Jetson/Thor devices apart
# (which drop one lowering pass); TensorRT for RTX does not read it: its builder targets the compute
# capabilities in its builder config, not the (absent) local device.
STAND_IN_CAPABILITY = (8, 9)


@dataclass(frozen=True)
class StandIn:
    """One stand-in: what it replaces, why a CPU-only build needs it, and what it changes."""

    name: str
    why: str
    changes: str
    install: Callable[[], None]

    def row(self) -> dict[str, str]:
        return {"stand-in": self.name, "why it is needed": self.why, "what it changes": self.changes}


class SerializedEngineOnly:
    """What the interpreter gets back instead of a deserialized engine: the builder's bytes.

    Torch-TensorRT's interpreter, under TensorRT for RTX, builds with ``build_serialized_network``,
    then deserializes the bytes into an engine only to call ``serialize()`` and
    ``get_aliased_input_tensor(name)`` on it. Deserializing needs a GPU (cudaError 35 here), so this
    object keeps the bytes and answers "no output aliases an input", true for the inference graphs
    the book builds (no KV cache, no in-place outputs).
    """

    def __init__(self, serialized: Any):
        self._bytes = bytes(serialized)

    def serialize(self) -> bytes:
        return self._bytes

    def get_aliased_input_tensor(self, name: str) -> None:
        return None


class RuntimeWithoutGPU:
    """Stands in for ``tensorrt.Runtime`` in Torch-TensorRT's interpreter only: "deserializes" to bytes."""

    def __init__(self, logger: Any = None):
        self.logger = logger

    def deserialize_cuda_engine(self, serialized: Any) -> SerializedEngineOnly:
        return SerializedEngineOnly(serialized)


def _cuda_queries() -> None:
    import torch

    torch.cuda.current_device = lambda: 0
    torch.cuda.get_device_capability = lambda device=None: STAND_IN_CAPABILITY


def _interpreter_runtime() -> None:
    import types

    from torch_tensorrt.dynamo.conversion import _TRTInterpreter

    real = _TRTInterpreter.trt

    class TensorRTWithoutGPU(types.ModuleType):
        """The interpreter's view of the tensorrt module: the real one, except ``Runtime``."""

        Runtime = RuntimeWithoutGPU

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

    _TRTInterpreter.trt = TensorRTWithoutGPU("tensorrt")


def _runtime_module() -> None:
    from torch_tensorrt.dynamo.runtime._TorchTensorRTModule import TorchTensorRTModule

    TorchTensorRTModule.setup_engine = lambda self: None
    TorchTensorRTModule.set_output_tensors_as_unowned = lambda self, enabled: None


def _fallback_device() -> None:
    import torch
    from torch_tensorrt._Device import Device

    real_to = Device.to

    def to(self: Any, t: type) -> Any:
        return torch.device("cpu") if t is torch.device else real_to(self, t)

    Device.to = to


CUDA_QUERIES = StandIn(
    "torch.cuda.current_device, torch.cuda.get_device_capability",
    "`import torch_tensorrt` reads the current device and its compute capability; with no GPU both "
    "raise ('Found no NVIDIA driver')",
    f"they answer device 0 with capability {STAND_IN_CAPABILITY} (an RTX part); Torch-TensorRT uses the "
    "capability only to tell Jetson and Thor devices apart",
    _cuda_queries,
)
INTERPRETER_RUNTIME = StandIn(
    "tensorrt.Runtime in Torch-TensorRT's interpreter",
    "after building, the interpreter deserializes the engine to read its aliased outputs; "
    "deserializing needs a GPU (cudaError 35)",
    "the 'engine' it gets back is the builder's serialized bytes, with no output aliasing an input; "
    "the bytes are unchanged",
    _interpreter_runtime,
)
RUNTIME_MODULE = StandIn(
    "TorchTensorRTModule.setup_engine, .set_output_tensors_as_unowned",
    "the module that holds an engine loads it into TensorRT's runtime on the GPU when it is created",
    "the module keeps the serialized engine and never loads it: it cannot be called here",
    _runtime_module,
)
FALLBACK_DEVICE = StandIn(
    "torch_tensorrt.Device.to(torch.device)",
    "during partitioning each PyTorch block is moved to the target device ('cuda:0'), which "
    "initializes CUDA and fails without a GPU",
    "PyTorch blocks stay on the CPU; the TensorRT blocks are unaffected",
    _fallback_device,
)
# In the order they must go in: the CUDA queries before `import torch_tensorrt`, the rest after.
BEFORE_IMPORT = (CUDA_QUERIES,)
AFTER_IMPORT = (INTERPRETER_RUNTIME, RUNTIME_MODULE, FALLBACK_DEVICE)
ALL = BEFORE_IMPORT + AFTER_IMPORT

# Settings, not stand-ins: passed to dynamo.compile on every CPU-only build, with the reason.
CPU_ONLY_SETTINGS = {
    # The default keeps the PyTorch model on the GPU and asks torch.cuda.mem_get_info how much is free.
    "offload_module_to_cpu": True,
}


def describe(stand_ins: tuple[StandIn, ...] = ALL) -> list[dict[str, str]]:
    """One row per stand-in, for a table on a page."""
    return [s.row() for s in stand_ins]
