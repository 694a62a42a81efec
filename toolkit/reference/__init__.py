"""Interop with the reference runner: import its JSONL result files into the store (one or many, checked
row by row), export runs in its format, and audit a published file against its own summary."""

from toolkit.reference._audit import AuditReport, audit_file
from toolkit.reference._export import export_reference
from toolkit.reference._read import (ImportFailure, ImportInterrupted, import_many, import_reference, printable,
                                     result_files)
from toolkit.reference._samples import export_samples, import_samples, sample_path

__all__ = ["AuditReport", "ImportFailure", "ImportInterrupted", "audit_file", "export_reference", "export_samples",
           "import_many", "import_reference", "import_samples", "printable", "result_files", "sample_path"]
