"""Human labels: the offline review page and the reviewers' labels it yields, kept beside the judges'.

Public interface: ``write_review`` (``bedside review``: one self-contained HTML page, its unblinding key
in the store's ``reviews`` table; ``review_at``: the review of a page an ``--out`` would replace), ``import_labels`` (``bedside labels import``: a page's export or a
CSV/JSONL table into ``human_labels``, one commit), ``add_labels`` (rows a program made, such as the demo's
simulated physician, through the same checks), ``read_labels`` (the stored labels), ``label_counts``
(``bedside labels``), ``draw_cases`` (which cases a review shows: at random within benchmarks, spread over
them), ``current_answers`` (the answer a label is about), ``LabelsError`` and ``LABEL_VALUES``. Labels
never change a judge's decisions.
"""

from __future__ import annotations

from toolkit.labels._files import LABEL_VALUES, LabelsError
from toolkit.labels._page import draw_cases, review_at, write_review
from toolkit.labels._store import (ImportSummary, add_labels, current_answers, import_labels, label_counts,
                                   read_labels)

__all__ = ["ImportSummary", "LABEL_VALUES", "LabelsError", "add_labels", "current_answers", "draw_cases",
           "import_labels", "label_counts", "read_labels", "review_at", "write_review"]
