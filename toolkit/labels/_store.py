"""Labels in the store: ``import_labels`` checks a file's labels against the store and adds them in one
commit, ``read_labels`` gives them back, ``label_counts`` says what is labelled.

A label names an answer (run, case, sample) and a rubric item of that case. One reviewer labels an item of
an answer once: a label the store already holds with the same value is skipped (importing an export again,
or a later export of the same page, adds only what is new); a different value for it is refused.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from toolkit.labels._files import LabelsError, Parsed, parse_file, reviewer_name
from toolkit.store import Store, StoreError
from toolkit.tables import LABEL_TABLES

COLUMNS = LABEL_TABLES["human_labels"].names
KEY = list(LABEL_TABLES["human_labels"].key)


@dataclass(frozen=True)
class ImportSummary:
    file: str
    review_id: str | None
    added: int  # labels written
    already: int  # labels the store held with the same value (skipped)
    reviewers: tuple[str, ...]
    runs: tuple[str, ...]


def current_answers(answers: pl.DataFrame) -> pl.DataFrame:
    """Per run, case and sample, the answer a label is about: the latest successful attempt, with the SHA-256
    of its text (run_id, case_id, sample, answer, answer_sha256)."""
    done = answers.filter(pl.col("error").is_null() & pl.col("answer").is_not_null())
    latest = done.sort("attempt").unique(["run_id", "case_id", "sample"], keep="last", maintain_order=True)
    digests = [hashlib.sha256(text.encode("utf-8")).hexdigest() for text in latest["answer"].to_list()]
    return latest.select("run_id", "case_id", "sample", "answer").with_columns(
        pl.Series("answer_sha256", digests, dtype=pl.String))


def _current(store: Store, run_ids: list[str]) -> pl.DataFrame:
    answers = store.read("answers", run_ids, columns=["run_id", "case_id", "sample", "attempt", "answer", "error"])
    return current_answers(answers).drop("answer")


def read_labels(store: Store, run_ids: list[str] | None = None, lapsed: bool = False) -> pl.DataFrame:
    """The labels (of ``run_ids``, or all) about the runs' current answers, exactly the ``human_labels``
    columns, in key order; ``lapsed``: also those about answers the runs no longer hold."""
    keys = None if run_ids is None else [store.stored_id(r) for r in run_ids]
    labels = store.read("human_labels", keys=keys).sort(KEY)
    if lapsed or labels.height == 0:
        return labels
    current = _current(store, sorted(set(labels["run_id"].to_list()) & set(store.run_ids())))
    return labels.join(current, on=["run_id", "case_id", "sample", "answer_sha256"], how="semi",
                       maintain_order="left")


def _unblind(store: Store, parsed: Parsed, problems: list[str]) -> list[dict]:
    """A page export's rows with the run, case and sample its review's key gives each blind id."""
    review = store.read("reviews", keys=[parsed.review_id])
    if review.height == 0:
        raise LabelsError([f"{parsed.file}: review {parsed.review_id!r} is not a review of the store "
                           f"{store.root} (a file from another store's review?)"])
    key = {r["blind_id"]: r for r in review.iter_rows(named=True)}
    out = []
    for row in parsed.rows:
        shown = key.get(row["blind_id"])
        if shown is None:
            problems.append(f"{row['where']}: blind_id {row['blind_id']!r} is not an answer of review "
                            f"{parsed.review_id!r} (a mistyped id, or the answer of a run since removed)")
            continue
        out.append({**row, "review_id": parsed.review_id, "run_id": shown["run_id"], "case_id": shown["case_id"],
                    "sample": shown["sample"], "shown_sha256": shown["answer_sha256"]})
    return out


def _check(store: Store, rows: list[dict], problems: list[str]) -> list[dict]:
    """The rows whose run, case, answer sample and item exist, with the run's stored id; a problem line for
    each other row."""
    runs = {}
    for run_id in dict.fromkeys(r["run_id"] for r in rows):
        canon = store.stored_id(run_id)
        if store.has_run(canon):
            runs[run_id] = canon
    found = list(dict.fromkeys(runs.values()))
    run_rows = store.read("runs", found, columns=["run_id", "dataset_sha256"])
    digest = dict(zip(run_rows["run_id"], run_rows["dataset_sha256"]))
    items = store.read("rubric_items", keys=sorted(set(digest.values())),
                       columns=["dataset_sha256", "case_id", "item_id"])
    cases = set(zip(items["dataset_sha256"], items["case_id"]))
    of_case = dict(zip(zip(items["dataset_sha256"], items["item_id"]), items["case_id"]))
    current = _current(store, found)
    answered = dict(zip(current.select("run_id", "case_id", "sample").iter_rows(), current["answer_sha256"]))
    out = []
    for row in rows:
        where, run_id = row["where"], runs.get(row["run_id"])
        if run_id is None:
            problems.append(f"{where}: run {row['run_id']!r} is not in the store {store.root}")
            continue
        sha = digest[run_id]
        if (sha, row["case_id"]) not in cases:
            problems.append(f"{where}: case {row['case_id']!r} is not a case of run {run_id!r}'s dataset")
            continue
        owner = of_case.get((sha, row["item_id"]))
        if owner is None:
            problems.append(f"{where}: item {row['item_id']!r} is not a rubric item of run {run_id!r}'s dataset")
            continue
        if owner != row["case_id"]:
            problems.append(f"{where}: item {row['item_id']!r} is not an item of case {row['case_id']!r} (it is "
                            f"case {owner!r}'s)")
            continue
        answer_sha = answered.get((run_id, row["case_id"], row["sample"]))
        if answer_sha is None:
            problems.append(f"{where}: run {run_id!r} has no answer to case {row['case_id']!r} sample {row['sample']}")
            continue
        if row.get("shown_sha256", answer_sha) != answer_sha:
            problems.append(f"{where}: run {run_id!r} case {row['case_id']!r} sample {row['sample']}: the answer "
                            "changed since the review page was written (the run was collected again); these labels "
                            "are about the old answer")
            continue
        out.append({**row, "run_id": run_id, "answer_sha256": answer_sha})
    return out


def _key(row: dict) -> tuple:
    return tuple(row[c] for c in KEY)


def _stored(store: Store, run_ids: list[str]) -> dict[tuple, str]:
    labels = read_labels(store, run_ids, lapsed=True)  # the key holds the answer's hash: lapsed never match
    return {tuple(r[:-1]): r[-1] for r in labels.select(*KEY, "label").iter_rows()}


def import_labels(store: Store, path: str | Path) -> ImportSummary:
    """Check a labels file (``toolkit.labels._files``) against the store and add its new labels in ONE
    commit; LabelsError listing every problem (one line each), and then the store is unchanged."""
    parsed = parse_file(path)
    problems: list[str] = []
    rows = _unblind(store, parsed, problems) if parsed.review_id is not None else parsed.rows
    return add_labels(store, rows, parsed.file, parsed.review_id, problems)


def add_labels(store: Store, rows: list[dict], source: str, review_id: str | None = None,
               problems: list[str] | None = None) -> ImportSummary:
    """Labels given as rows (the ``human_labels`` columns and ``where``, the row's place for a problem
    line) checked and added as ``import_labels`` does: the one path every label takes into the store."""
    problems = [] if problems is None else problems
    named = [{**r, "reviewer": reviewer_name(r["reviewer"], r["where"], problems)} for r in rows]
    rows = _check(store, [r for r in named if r["reviewer"] is not None], problems)
    first: dict[tuple, str] = {}
    for row in rows:
        where = first.setdefault(_key(row), row["where"])
        if where != row["where"]:
            problems.append(f"{row['where']}: reviewer {row['reviewer']!r} labels run {row['run_id']!r} case "
                            f"{row['case_id']!r} sample {row['sample']} item {row['item_id']!r} again (first at "
                            f"{where.rpartition(': ')[2]})")
    run_ids = sorted({r["run_id"] for r in rows})
    stored = _stored(store, run_ids)
    for row in rows:
        held = stored.get(_key(row))
        if held is not None and held != row["label"]:
            problems.append(f"{row['where']}: reviewer {row['reviewer']!r} already labelled run {row['run_id']!r} "
                            f"case {row['case_id']!r} sample {row['sample']} item {row['item_id']!r} as {held}; "
                            f"this file says {row['label']}")
    if problems:
        raise LabelsError(problems)
    new = [{c: r.get(c) for c in COLUMNS} for r in rows if _key(r) not in stored]

    def still_new() -> None:  # under the store's lock: no other import added them meanwhile
        gone = [r for r in run_ids if not store.has_run(r)]  # a rename or removal moves labels under this lock
        if gone:
            raise StoreError(f"{source}: run {gone[0]!r} was renamed or removed meanwhile; import again")
        now = _stored(store, run_ids)
        if any(_key(r) in now for r in new):
            raise StoreError(f"{source}: another import added some of these labels meanwhile; import again")

    store.append_rows("human_labels", new, [r["run_id"] for r in new], check=still_new)
    return ImportSummary(source, review_id, len(new), len(rows) - len(new),
                         tuple(sorted({r["reviewer"] for r in rows})), tuple(run_ids))


def label_counts(store: Store, run_ids: list[str] | None = None) -> pl.DataFrame:
    """What is labelled, per run and reviewer: cases, answers and items labelled, and how many labels of each
    value."""
    labels = read_labels(store, run_ids)
    return labels.group_by("run_id", "reviewer").agg(
        pl.col("case_id").n_unique().alias("cases"),
        pl.struct("case_id", "sample").n_unique().alias("answers"),
        pl.len().alias("items"),
        *((pl.col("label") == v).sum().alias(v) for v in ("met", "not_met", "unsure")),
    ).sort("run_id", "reviewer")
