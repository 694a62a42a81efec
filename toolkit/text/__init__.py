"""Text that leaves the toolkit: for terminals (control characters made visible) and for spreadsheets
(CSV whose formula-like cells are neutralised)."""

from toolkit.text._spreadsheet import neutralised, write_csv
from toolkit.text._terminal import visible, visible_json

__all__ = ["neutralised", "visible", "visible_json", "write_csv"]
