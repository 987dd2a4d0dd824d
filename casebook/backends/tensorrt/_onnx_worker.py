"""Subprocess entry point for `casebook.backends.tensorrt.onnx_parser`: TensorRT's ONNX parser and builder.

Run as ``python -m casebook.backends.tensorrt._onnx_worker REQUEST_DIR``; ``request.json`` there names the
ONNX file, the optimization profiles and where to write the engine, and the worker writes
``result.json``. It uses TensorRT for RTX's own Python API (``tensorrt_rtx``), which parses and builds
without a GPU and needs no stand-in; a process of its own keeps the builder's memory out of the page.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any


def run(request: dict[str, Any]) -> dict[str, Any]:
    import tensorrt_rtx as trt

    class Collect(trt.ILogger):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self.messages: list[str] = []

        def log(self, severity: Any, msg: str) -> None:
            if severity in (trt.ILogger.Severity.ERROR, trt.ILogger.Severity.INTERNAL_ERROR):
                self.messages.append(msg)

    logger = Collect()
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    start = time.perf_counter()
    parsed = parser.parse_from_file(request["onnx"])
    errors = []
    for i in range(parser.num_errors):
        error = parser.get_error(i)
        errors.append(
            {
                "code": str(error.code()).removeprefix("ErrorCode."),
                "node": error.node(),
                "node_name": error.node_name(),
                "operator": error.node_operator(),
                "description": error.desc(),
            }
        )
    inputs = [network.get_input(i) for i in range(network.num_inputs)] if parsed else []
    result: dict[str, Any] = {
        "ok": True,
        "tensorrt": trt.__version__,
        "parsed": bool(parsed),
        "parser_errors": errors,
        "inputs": {t.name: list(t.shape) for t in inputs},
        "layers": network.num_layers if parsed else 0,
        # What this TensorRT's plugin registry holds: the parser looks there for operators it has no
        # built-in importer for.
        "plugin_creators": sorted(
            f"{creator.name} {creator.plugin_version}" for creator in trt.get_plugin_registry().all_creators
        ),
        "engine": None,
        "engine_bytes": None,
        "builder_errors": [],
    }
    if parsed:
        config = builder.create_builder_config()
        if request["profiles"]:
            profile = builder.create_optimization_profile()
            for name, (low, opt, high) in request["profiles"].items():
                profile.set_shape(name, low, opt, high)
            config.add_optimization_profile(profile)
        serialized = builder.build_serialized_network(network, config)
        if serialized is not None:
            Path(request["engine"]).write_bytes(bytes(serialized))
            result.update(engine=request["engine"], engine_bytes=serialized.nbytes)
        result["builder_errors"] = list(logger.messages)
    result["seconds"] = time.perf_counter() - start
    return result


def main(argv: list[str]) -> int:
    request_dir = Path(argv[1])
    try:
        result = run(json.loads((request_dir / "request.json").read_text()))
    except BaseException as exc:  # reported to the parent, which raises
        result = {
            "ok": False,
            "error_type": type(exc).__qualname__,
            "message": str(exc),
            "traceback": traceback.format_exc(),
        }
    (request_dir / "result.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
