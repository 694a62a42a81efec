"""A dataset's cases and rubric items as the store's ``cases`` and ``rubric_items`` tables (polars frames of
the tables' schemas), severity classes and weights from the protocol."""

from __future__ import annotations

from typing import Any

import polars as pl

from toolkit import protocol
from toolkit.tables import polars_schema


def frames(raw: tuple[dict[str, Any], ...], sha: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    cases = pl.DataFrame(
        {
            "dataset_sha256": [sha] * len(raw),
            "case_id": [c["case_id"] for c in raw],
            "benchmark": [c["benchmark"] for c in raw],
            "grading_method": [c["grading_method"] for c in raw],
            "prompt": [c["prompt"] for c in raw],
            "split": [c.get("split") for c in raw],
            "position": list(range(len(raw))),
            "n_items": [len(c["rubric_items"]) for c in raw],
        },
        schema=polars_schema("cases"),
    )
    items = [
        (c["case_id"], c["benchmark"], c["grading_method"], it["item_id"], i, it["text"], float(it["points"]))
        for c in raw for i, it in enumerate(c["rubric_items"])
    ]
    cols = list(zip(*items)) if items else [[]] * 7
    f1 = pl.col("grading_method") == protocol.F1_WEIGHTED_RUBRIC
    klass = pl.col("points").cast(pl.Int32).replace_strict(
        {int(k): v for k, v in protocol.POINTS_TO_CLASS.items()}, default=None, return_dtype=pl.Int32)
    rubric = pl.DataFrame(
        {
            "dataset_sha256": [sha] * len(items),
            "case_id": cols[0], "benchmark": cols[1], "grading_method": cols[2],
            "item_id": cols[3], "item_index": cols[4], "text": cols[5], "points": cols[6],
        },
        schema={k: v for k, v in polars_schema("rubric_items").items() if k not in ("severity_class", "weight")},
    ).with_columns(
        severity_class=pl.when(f1).then(klass),
    ).with_columns(
        weight=pl.col("severity_class").replace_strict(
            {k: float(v) for k, v in protocol.CLASS_WEIGHT.items()}, default=None, return_dtype=pl.Float64),
    )
    return cases, rubric

