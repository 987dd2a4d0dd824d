"""The PT2E Casebook's helper package: everything the pages import that is not the lesson itself.

- `catalog`: the book's export problems as data (message, exception types, page, fix); the playbook
  renders it and the doctor classifies with it.
- `doctor/`: `diagnose(model, args)` and its command line: a model's
  export problems, each sent to the page that fixes it.
- `toc`: the pages of `_toc.yml` by name; `sphinx_redirects`: earlier addresses of moved pages.
- `parity`, `detection_parity`: parity with eager, output tree by output tree (also for programs
  that write state), and for detectors (ties, matched boxes).
- `expected_errors`, `display`: a failure a page reproduces, asserted by type and message and shown.
- `checked_program`: an exported program that checks each call against what it was exported for.
- `introspect`: read-only views of an ExportedProgram (runtime asserts, input shapes, signature, writes).
- `logs`: what PyTorch logs while a block runs (symbolic shapes, graph breaks), captured.
- `inputs`, `env`, `figures`, `benchmark`, `profiling`: input plumbing, versions, diagrams, timing.
- `page`, `noise`: each page's first cell (the version stamp) and the known noise it hides.
- `pytree_nodes`: registering classes as pytree nodes.
- `build_times`, `busy`, `fresh_process`: the build's page and engine timings, and process helpers.
- `sphinx_outputs`, `sphinx_assets`, `sphinx_redirects`: the book's Sphinx extensions.
- `backends/`: one record per backend (`registry`), lowering with parity and caching, the CPU routes
  side by side, and all TensorRT code (engine builds without a GPU, dry-run coverage, partition).
- `patches/`: one patch mechanism and the torchvision, detectron2 and deformable DETR patch sets.
- `models/`: one record per model (`records`), and model code written for the book (deformable
  DETR, MViT for small clips, stand-ins, the detection zoo, images).
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
"""The checkout the book is built from: the package lives in its `casebook/` folder. The one
definition; modules, scripts and tests import it."""
