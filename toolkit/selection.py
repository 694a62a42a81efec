"""Which judge and passes of a run are scored, and the per-case frame every summary starts from."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import polars as pl

from toolkit.scoring import PASS_KEY, case_scores, pass_scores, sample_scores, with_sample
from toolkit.store import Store, StoreError
from toolkit.tables import TABLES, polars_schema


@dataclass(frozen=True)
class JudgeSelection:
    """``judge``: a judge model (default: each run's primary judge); ``passes``: pass numbers (default: all)."""

    judge: str | None = None
    passes: tuple[int, ...] | None = None

    def describe(self) -> str:
        """The scores' judge and passes in words, for a command's notes."""
        judge = f"judge {self.judge}" if self.judge is not None else "each run's primary judge"
        passes = "all passes" if self.passes is None else "passes " + ",".join(map(str, self.passes))
        return f"scores of {judge}, {passes}"

    @property
    def is_stored(self) -> bool:
        """Whether the score tables are stored under this selection: each run's primary judge, all passes."""
        return self.judge is None and self.passes is None


@dataclass(frozen=True, eq=False)
class RunData:
    """The stored rows of some runs, read once."""

    runs: pl.DataFrame
    answers: pl.DataFrame
    judgments: pl.DataFrame
    decisions: pl.DataFrame
    cases: pl.DataFrame
    rubric_items: pl.DataFrame
    # per_case under the default selection as the runs' commits stored it (None: some run has none stored)
    stored_cases: pl.DataFrame | None = None
    # run_id, judge_pass of each run's primary judge's scored passes, as stored (None: not read)
    stored_passes: pl.DataFrame | None = None
    # False: ``read_runs(decisions=False)`` left the decisions out (``decisions`` is empty); only the stored
    # scores of the default selection can be used (``select_judgments`` refuses to compute any)
    decisions_read: bool = True

    def of(self, run_ids: list[str]) -> "RunData":
        """The rows of these runs only (and of their datasets): what an analysis of just them reads."""
        keep = pl.col("run_id").is_in(run_ids)
        runs = self.runs.filter(keep)
        digests = pl.col("dataset_sha256").is_in(runs["dataset_sha256"].unique().to_list())
        return RunData(runs, self.answers.filter(keep), self.judgments.filter(keep), self.decisions.filter(keep),
                       self.cases.filter(digests), self.rubric_items.filter(digests),
                       *(None if f is None else f.filter(keep) for f in (self.stored_cases, self.stored_passes)),
                       self.decisions_read)


def chosen_run_ids(store: Store, given: list[str]) -> list[str]:
    """The store's runs named by ``given``: each an id, or, when no run has that exact id and it holds a glob
    character (``*``, ``?``, ``[``), a pattern matched against every run id (its runs in store order). A run
    named twice is one run (first occurrence order); an NFD spelling names the NFC run. A pattern that
    matches no run is a StoreError naming it; an unknown plain id is refused by the read that follows."""
    import fnmatch

    known: list[str] | None = None
    out: list[str] = []
    for name in given:
        stored = store.stored_id(name)
        if any(ch in name for ch in "*?[") and not store.has_run(stored):
            known = store.run_ids() if known is None else known
            matched = [r for r in known if fnmatch.fnmatchcase(r, name)]
            if not matched:
                raise StoreError(f"{store.root}: no run id matches the pattern {name!r} ({len(known)} runs)")
            out += matched
        else:
            out.append(stored)
    return list(dict.fromkeys(out))


RUN_TABLES = ("answers", "judgments", "decisions", "case_scores")  # the run tables ``read_runs`` reads


def run_tables(decisions: bool = True, passes: bool = False) -> tuple[str, ...]:
    """The run tables ``read_runs(decisions=..., passes=...)`` reads of runs whose scores are stored."""
    if decisions:
        return RUN_TABLES
    return ("answers", "judgments", "case_scores", *(("pass_scores",) if passes else ()))


# Long text columns that scoring and summaries never look at.
TEXT_COLUMNS = {"answers": ("answer",), "judgments": ("raw_reply", "reported_components")}


def read_columns(table: str, texts: bool) -> list[str]:
    """The columns of ``table`` a reader takes: all, or without the long texts (``texts=False``)."""
    drop = () if texts else TEXT_COLUMNS.get(table, ())
    return [c for c in TABLES[table].names if c not in drop]


def read_runs(store: Store, run_ids: list[str], texts: bool = True, decisions: bool = True,
              columns: dict[str, list[str]] | None = None, passes: bool = False) -> RunData:
    """The stored rows of these runs and their datasets; ``texts=False`` leaves out answer and reply texts;
    ``decisions=False`` leaves the decisions frame empty when every run's case scores are stored (for readers
    of ``per_case`` under the default selection that never look at decisions; otherwise they are read), and
    ``passes=True`` then reads which passes were scored (``RunData.stored_passes``: ``run_facts``' passes);
    ``columns``: by run table (``case_scores`` included), only these columns (for a reader that knows what
    it looks at).

    A run id given twice is read once (first occurrence order). The tables are read one by one; when a
    commit landed meanwhile they are read again as of the store version the reading began at, so the
    frames always come from one commit."""
    run_ids = list(dict.fromkeys(run_ids))
    store.prefetch(("runs", *run_tables(decisions, passes), "cases", "rubric_items"))
    version = store.version()
    data = _read_tables(store, run_ids, texts, decisions, columns or {}, passes)
    if store.pinned is None and version is not None and store.version() != version:
        data = _read_tables(Store.open(store.root, version=version), run_ids, texts, decisions, columns or {}, passes)
    return data


def _read_tables(store: Store, run_ids: list[str], texts: bool, decisions: bool,
                 columns: dict[str, list[str]], passes: bool) -> RunData:
    runs = store.read("runs", run_ids).unique("run_id", keep="last", maintain_order=True)
    found = set(runs["run_id"].to_list())
    unknown = [r for r in run_ids if r not in found]
    if unknown:
        store.run(unknown[0])  # raises the store's clear error for an unknown run
    shas = runs["dataset_sha256"].unique().to_list()
    missing = [s for s in shas if not store.has_dataset(s)]
    if missing:
        raise StoreError(f"{store.root}: dataset {missing[0]} of the selected runs is not stored")

    def read(table: str) -> pl.DataFrame:
        return store.read(table, run_ids, columns=columns.get(table) or read_columns(table, texts))

    stored = None if store.unscored(run_ids) else store.read("case_scores", run_ids,
                                                             columns=columns.get("case_scores"))
    if decisions or stored is None:
        return RunData(runs, read("answers"), read("judgments"), read("decisions"), store.read("cases", keys=shas),
                       store.read("rubric_items", keys=shas), stored)
    none = pl.DataFrame(schema=polars_schema("decisions", columns.get("decisions") or read_columns("decisions", texts)))
    scored = None
    if passes:
        primary = runs.select("run_id", "judge_model")
        scored = store.read("pass_scores", run_ids, columns=["run_id", "judge_model", "judge_pass"]).join(
            primary, on=["run_id", "judge_model"], how="semi").select("run_id", "judge_pass")
    return RunData(runs, read("answers"), read("judgments"), none, store.read("cases", keys=shas),
                   store.read("rubric_items", keys=shas), stored, scored, decisions_read=False)


# select_judgments' answers by RunData (weakly: they go with it) and selection. Frames never change in
# place, and a comparison asks the same question twice (per-case scores, then the runs' facts).
_SELECTED: "weakref.WeakKeyDictionary[RunData, dict[JudgeSelection, tuple[pl.DataFrame, pl.DataFrame]]]" = \
    weakref.WeakKeyDictionary()


def select_judgments(data: RunData, selection: JudgeSelection) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(judgments, decisions) of the selected judge and passes of every run."""
    if not data.decisions_read:
        raise ValueError("the decisions were not read (read_runs(decisions=False)): scores of this judge "
                         "selection cannot be computed")
    known = _SELECTED.setdefault(data, {})
    if selection not in known:
        known[selection] = _select_judgments(data, selection)
    return known[selection]


def _select_judgments(data: RunData, selection: JudgeSelection) -> tuple[pl.DataFrame, pl.DataFrame]:
    judge_of = data.runs.select("run_id", pl.col("judge_model").alias("_judge"))
    if selection.judge is not None:
        judge_of = judge_of.with_columns(_judge=pl.lit(selection.judge))

    def pick(frame: pl.DataFrame) -> pl.DataFrame:
        out = frame.join(judge_of, on="run_id").filter(pl.col("judge_model") == pl.col("_judge")).drop("_judge")
        if selection.passes is not None:
            out = out.filter(pl.col("judge_pass").is_in(list(selection.passes)))
        return out

    judgments = pick(data.judgments)
    return judgments, latest_valid_decisions(judgments, pick(data.decisions))


def latest_valid_decisions(judgments: pl.DataFrame, decisions: pl.DataFrame) -> pl.DataFrame:
    """The decisions of each run x case x sample x judge x pass's latest valid reply.

    The decisions table keeps the decisions of every valid reply (its key includes
    ``judgment_attempt``), but a pass is scored from its latest one (the reference's "last
    successful row wins"); anything that reads decisions per pass must go through this.
    """
    judgments, decisions = with_sample(judgments), with_sample(decisions)
    winners = judgments.filter(pl.col("error").is_null()).group_by(PASS_KEY).agg(
        pl.col("attempt").max().alias("judgment_attempt"))
    return decisions.join(winners, on=[*PASS_KEY, "judgment_attempt"], how="semi")


def scored_passes(data: RunData, decisions: pl.DataFrame) -> pl.DataFrame:
    """``pass_scores`` of the given decisions, each run scored against its own dataset's rubric."""
    frames = []
    for sha, runs in data.runs.group_by("dataset_sha256"):
        ids = runs["run_id"].to_list()
        part = decisions.filter(pl.col("run_id").is_in(ids))
        items = data.rubric_items.filter(pl.col("dataset_sha256") == sha[0])
        frames.append(pass_scores(part, items))
    return pl.concat(frames) if frames else pass_scores(decisions, data.rubric_items)


_PASSES: "weakref.WeakKeyDictionary[RunData, dict[JudgeSelection, pl.DataFrame]]" = weakref.WeakKeyDictionary()


def selected_passes(data: RunData, selection: JudgeSelection) -> pl.DataFrame:
    """``pass_scores`` of the selected judge and passes' latest valid replies (computed once per data and
    selection: case, sample and pass-level frames all start from it)."""
    known = _PASSES.setdefault(data, {})
    if selection not in known:
        known[selection] = scored_passes(data, select_judgments(data, selection)[1])
    return known[selection]


def pass_level_scores(data: RunData, selection: JudgeSelection = JudgeSelection()) -> pl.DataFrame:
    """One row per run x case x sample x pass of the selected judge (each run's primary judge by default):
    run_id, benchmark, case_id, sample, judge_pass, score: the frame variance estimates start from."""
    return selected_passes(data, selection).select(
        "run_id", "benchmark", "case_id", "sample", "judge_pass", "score").sort(
        "run_id", "case_id", "sample", "judge_pass")


def per_sample(data: RunData, selection: JudgeSelection = JudgeSelection()) -> pl.DataFrame:
    """One row per run x completed case x sample: run_id, case_id, sample, benchmark, score (the mean over
    the sample's scored passes) and passes, cases in dataset order."""
    scores = sample_scores(selected_passes(data, selection))
    position = data.runs.select("run_id", "dataset_sha256").join(
        data.cases.select("dataset_sha256", "case_id", "position"), on="dataset_sha256")
    return (scores.join(position.drop("dataset_sha256"), on=["run_id", "case_id"], how="inner")
            .sort("run_id", "position", "sample").select("run_id", "case_id", "sample", "benchmark", "score", "passes"))


def per_case(data: RunData, selection: JudgeSelection = JudgeSelection()) -> pl.DataFrame:
    """One row per run x completed case: score (the mean over its samples of their means over passes), dataset
    position, completion order (first successful judgment's seq) and the score the source file reported, if
    any. Under the default selection, the rows the runs' commits stored (this function's own result, computed
    then)."""
    if data.stored_cases is not None and selection.is_stored:
        # the runs of ``data`` only, should a caller have narrowed its runs without RunData.of
        return data.stored_cases.filter(pl.col("run_id").is_in(data.runs["run_id"].implode()))
    judgments, _ = select_judgments(data, selection)
    scores = case_scores(selected_passes(data, selection))
    ok = judgments.filter(pl.col("error").is_null())
    first = ok.group_by("run_id", "case_id").agg(pl.col("seq").min().alias("first_success_seq"))
    # The reference keeps the score written on the LAST successful row of a case: per sample (one source
    # file each), then their mean, like the recomputed score (null when a sample's file wrote none).
    reported = (with_sample(ok).sort("seq").group_by("run_id", "case_id", "sample", maintain_order=True)
                .agg(pl.col("reported_score").last())
                .group_by("run_id", "case_id", maintain_order=True)
                .agg(pl.when(pl.col("reported_score").null_count() == 0).then(pl.col("reported_score").mean())
                     .alias("reported_score")))
    position = data.runs.select("run_id", "dataset_sha256").join(
        data.cases.select("dataset_sha256", "case_id", "position"), on="dataset_sha256")
    return (
        scores.join(position.drop("dataset_sha256"), on=["run_id", "case_id"], how="inner")
        .join(first, on=["run_id", "case_id"], how="left")
        .join(reported, on=["run_id", "case_id"], how="left")
    )
