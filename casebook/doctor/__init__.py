"""The export doctor: diagnose a model's export and send each problem to the page that fixes it.

    from casebook.doctor import diagnose
    report = diagnose(model, (x,), dynamic_shapes=({0: Dim.AUTO},))
    report.ok, report.findings, print(report), report.to_json()

or, from a shell, on a file that defines ``factory()`` returning ``{"model": ..., "args": (...)}``::

    python -m casebook.doctor path/to/file.py:factory [--json] [--tensorrt]

Every problem is classified with the book's catalog (`casebook.catalog`), which the debugging
playbook renders too; what the catalog does not know is reported as ``unclassified``.
"""

from .diagnose import DoctorUsageError, diagnose
from .report import Finding, Report, Step

__all__ = ["DoctorUsageError", "Finding", "Report", "Step", "diagnose"]
