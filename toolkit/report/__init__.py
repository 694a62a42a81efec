"""The comparison report: ``write_report`` renders the analyses and figures of some stored runs into one
self-contained ``index.html``, a GitHub-ready ``report.md``, ``figures/*.png`` and ``tables/*.csv``."""

from toolkit.report.build import ReportPaths, write_report
from toolkit.report.options import ReportOptions

__all__ = ["ReportOptions", "ReportPaths", "write_report"]
