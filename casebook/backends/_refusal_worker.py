"""Run a set of inputs through one deploy route's artifact, in its own process (see ``refusals.py``).

    python -m casebook.backends._refusal_worker ROUTE ARTIFACT CASES.pt FOLDER START

ROUTE is one of ``refusals.IN_PROCESS_LOADERS``. CASES.pt holds a list of (name, args, kwargs). From index
START on, each case's outcome is written before the next one starts: ``FOLDER/<i>.json`` holds what
happened (``ran``, or the exception's type and first line) and ``FOLDER/<i>.pt`` the outputs. A case
that kills the process leaves ``FOLDER/started`` naming it and no ``.json``: the parent records the
crash and starts a new worker after it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from torch.utils import _pytree as pytree

CASE_MARKER = "refusal worker: case "


def load(route: str, artifact: str):
    """The artifact loaded the way its runtime loads it, called like the program: ExecuTorch and ONNX
    Runtime get the inputs' tensors flattened, in order."""
    if route == "ExportedProgram":
        return torch.export.load(artifact).module()
    if route == "AOTInductor (Python)":
        return torch._inductor.aoti_load_package(artifact)
    if route == "ExecuTorch + XNNPACK":
        from executorch.runtime import Runtime

        method = Runtime.get().load_program(artifact).load_method("forward")
        # The runtime's own call, with the tensors as given (no .contiguous() on the way in).
        return lambda *args: list(method.execute(pytree.tree_leaves(args)))
    if route == "ONNX Runtime":
        from casebook.backends.onnx_runtime import OnnxRuntimeProgram

        session = OnnxRuntimeProgram(artifact, threads=1)
        return lambda *args: session(*pytree.tree_leaves(args))
    raise ValueError(f"no loader for route {route!r}")


def main(route: str, artifact: str, cases_file: str, folder: str, start: str) -> None:
    torch.set_num_threads(1)
    out = Path(folder)
    run = load(route, artifact)
    cases = torch.load(cases_file)
    for index in range(int(start), len(cases)):
        (out / "started").write_text(str(index))
        # A runtime's own log lines (ExecuTorch's "[method.cpp:1206] ...") go to stderr: the marker
        # tells the parent which case they belong to.
        print(f"{CASE_MARKER}{index}", file=sys.stderr, flush=True)
        _, args, kwargs = cases[index]
        try:
            with torch.no_grad():
                outputs = [t.detach().clone() for t in pytree.tree_leaves(run(*args, **kwargs))]
        except Exception as error:  # the outcome being measured: which error, with which message
            message = str(error).strip().splitlines()[0] if str(error).strip() else ""
            result = {"ran": False, "error": f"{type(error).__name__}: {message}"}
        else:
            torch.save(outputs, out / f"{index}.pt")
            result = {"ran": True}
        (out / f"{index}.json").write_text(json.dumps(result))
    (out / "started").unlink(missing_ok=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
