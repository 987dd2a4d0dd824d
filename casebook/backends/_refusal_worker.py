"""Run a set of inputs through one deploy route's artifact, in its own process (see ``refusals.py``).

    python -m casebook.backends._refusal_worker ROUTE ARTIFACT CASES.pt FOLDER START

ROUTE is one of ``refusals.IN_PROCESS_LOADERS``: a backend's ``route`` in the registry. CASES.pt holds a list of (name, args, kwargs). From index
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
    """The artifact loaded the way its runtime loads it (the registry's `load_as_given`, else its
    `load`), on one thread, called like the program: a backend whose callable takes flat tensors
    (ExecuTorch, ONNX Runtime) gets the inputs' tensors flattened, in order."""
    from casebook.backends.registry import backend_of_route

    backend = backend_of_route(route)
    if backend.load is None:
        raise ValueError(f"{route!r} runs in a process of its own, not in this worker (refusals.probe)")
    loaded = (backend.load_as_given or backend.load)(Path(artifact), torch.device("cpu"), {"threads": 1})
    if backend.flat_outputs:
        return lambda *args: loaded(*pytree.tree_leaves(args))
    return loaded


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
