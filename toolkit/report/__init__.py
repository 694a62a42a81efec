"""The comparison report: ``write_report`` renders the analyses and figures of some stored runs into one
self-contained ``index.html``, a GitHub-ready ``report.md``, ``figures/*.png`` and ``tables/*.csv``."""

from toolkit.report.build import ReportOptions, ReportPaths, write_report

__all__ = ["ReportOptions", "ReportPaths", "write_report"]
