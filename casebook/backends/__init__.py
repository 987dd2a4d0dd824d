"""Backends an ExportedProgram can be lowered to, with parity and caching (`lower`); each is one record
of `registry`: AOTInductor, TensorRT, ExecuTorch, ONNX Runtime."""

from .lowering import Lowered, choose_backend, lower
from .tensorrt.coverage import (
    CoverageAnalysisError,
    CoverageReport,
    PartitionBlock,
    coverage_report,
    coverage_reports,
    coverage_reports_by_program,
    start_coverage_reports_by_program,
)

__all__ = [
    "CoverageAnalysisError",
    "CoverageReport",
    "Lowered",
    "PartitionBlock",
    "choose_backend",
    "coverage_report",
    "coverage_reports",
    "coverage_reports_by_program",
    "lower",
    "start_coverage_reports_by_program",
]
