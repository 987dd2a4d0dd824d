"""The PT2E Casebook's helper package: everything the pages import that is not the lesson itself.

- `catalog`: the book's export problems as data (message, page, fix); the playbook renders it.
- `doctor/`: `diagnose(model, args)` and its command line: a model's export problems, each sent
  to the page that fixes it.
- `checks`: parity with eager, and expected errors (the build breaks when an error stops happening).
- `introspect`: read-only views of an ExportedProgram (runtime asserts, input shapes, signature, writes).
- `logs`: what PyTorch logs while a block runs (symbolic shapes, graph breaks), captured.
- `inputs`, `env`, `figures`, `benchmark`: input plumbing, versions, diagrams, timing.
- `pytree_nodes`: registering classes as pytree nodes.
- `backends/`: lowering with parity and caching; all TensorRT code (dry-run coverage, partition, source).
- `patches/`: one patch mechanism and the torchvision and detectron2 patch sets.
- `models/`: model code written for the book (deformable DETR, MViT for small clips, stand-ins, images).
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
"""The checkout the book is built from: the package lives in its `casebook/` folder. The one
definition; modules, scripts and tests import it."""
