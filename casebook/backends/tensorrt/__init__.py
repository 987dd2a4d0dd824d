"""All of the book's TensorRT code, one module a job.

- `engine`: real engines from an ExportedProgram without a GPU (`build_engines`, Torch-TensorRT for
  RTX in a worker process, `_build_worker`), with the stand-ins it needs listed in `stand_ins`.
- `coverage`: Torch-TensorRT's dry run, in a worker process (`_dryrun_worker`): what TensorRT would
  take; `partition`: that answer as ordered segments and a figure.
- `onnx_parser`: TensorRT's ONNX parser and builder on an ``.onnx`` file (`_onnx_worker`).
- `runtime`: Torch-TensorRT on a machine with a CUDA GPU (the registry's ``tensorrt`` backend).
- `source`: facts read from the installed Torch-TensorRT's source, without importing it.
"""
