"""Where runs differ most: for the top pairs, the cases with the largest score gap, answers side by side."""

from __future__ import annotations

import polars as pl

from toolkit.analysis.items import item_rates
from toolkit.report.analyses import Analyses
from toolkit.report.model import CaseView, PairView, Side, case_anchor, num, signed, slug
from toolkit.scoring import with_sample
from toolkit.selection import JudgeSelection

TOP_PAIRS = 3
TOP_CASES = 5


def top_pairs(a: Analyses) -> list[tuple[str, str]]:
    """The pairs a reader decides between: neighbours at the top of the leaderboard, or, with a baseline,
    the baseline against the best other runs. (first, second) with the first ahead or the challenger."""
    order = a.cmp.leaderboard["run_id"].to_list()
    if a.baseline is not None:
        return [(r, a.baseline) for r in order if r != a.baseline][:TOP_PAIRS]
    return list(zip(order, order[1:]))[:TOP_PAIRS]


def pair_gaps(cases: pl.DataFrame, run_a: str, run_b: str) -> pl.DataFrame:
    """Common cases of the pair with score_a, score_b and gap (a - b), largest |gap| first."""
    a = cases.filter(pl.col("run_id") == run_a).select("benchmark", "case_id", pl.col("score").alias("score_a"))
    b = cases.filter(pl.col("run_id") == run_b).select("case_id", pl.col("score").alias("score_b"))
    return a.join(b, on="case_id").with_columns(gap=pl.col("score_a") - pl.col("score_b")).sort(
        [pl.col("gap").abs(), "case_id"], descending=[True, False]).with_columns(
        run_a=pl.lit(run_a), run_b=pl.lit(run_b)).select("run_a", "run_b", "benchmark", "case_id", "score_a",
                                                         "score_b", "gap")


def _answers(a: Analyses) -> dict[tuple[str, str], str]:
    """The answer each case was scored on: per sample, the one its latest valid judgment graded, else the
    latest one. A case with several answers shows every one, each headed with its sample and score."""
    ok = with_sample(a.data.answers).filter(pl.col("error").is_null())
    keys = ["run_id", "case_id", "sample"]
    judged = with_sample(a.data.judgments).filter(pl.col("error").is_null()).sort("seq").group_by(keys).agg(
        pl.col("answer_attempt").last().alias("attempt"))
    graded = ok.join(judged, on=[*keys, "attempt"]).select(*keys, "answer")
    latest = ok.sort("attempt").group_by(keys).agg(pl.col("answer").last())
    texts = {(r, c, s): t or "" for r, c, s, t in latest.iter_rows()}
    texts.update({(r, c, s): t or "" for r, c, s, t in graded.iter_rows()})
    by_case: dict[tuple[str, str], list[int]] = {}
    for r, c, s in sorted(texts):
        by_case.setdefault((r, c), []).append(s)
    scores = {} if a.samples is None else {(r["run_id"], r["case_id"], r["sample"]): r["score"]
                                           for r in a.samples.iter_rows(named=True)}
    out = {}
    for (r, c), samples in by_case.items():
        if len(samples) == 1:
            out[r, c] = texts[r, c, samples[0]]
            continue
        out[r, c] = "\n\n".join(f"— answer {i} of {len(samples)} (sample {s}, score {num(scores.get((r, c, s)), 2)}) —"
                                 f"\n{texts[r, c, s]}" for i, s in enumerate(samples, start=1))
    return out


def _mark(points: float, matched: float) -> str:
    hit = matched >= 0.5
    if points > 0:
        return "matched" if hit else "missed"
    if points < 0:
        return "endorsed" if hit else "avoided"
    return "matched" if hit else "not matched"


def differ(a: Analyses, anchors: dict[str, str], selection: JudgeSelection) -> tuple[list[PairView], pl.DataFrame]:
    """The pair views and the frame of every case shown (tables/differ.csv)."""
    pairs = top_pairs(a)
    if not pairs:
        return [], pl.DataFrame()
    gaps = [pair_gaps(a.cases, x, y).head(TOP_CASES) for x, y in pairs]
    shown = pl.concat(gaps)
    wanted = shown.select("case_id").unique()
    rates = item_rates(a.data, selection).join(wanted, on="case_id").sort("item_id")
    by_key: dict[tuple[str, str], list[dict]] = {}
    for r in rates.iter_rows(named=True):
        by_key.setdefault((r["run_id"], r["case_id"]), []).append(r)
    answers = _answers(a)
    prompts = dict(a.data.cases.select("case_id", "prompt").iter_rows())
    views = []
    for (x, y), frame in zip(pairs, gaps):
        cases = []
        for r in frame.iter_rows(named=True):
            sides = tuple(Side(run, anchors[run], num(score, 2), answers.get((run, r["case_id"]), "(no answer stored)"),
                               [(_mark(i["points"], i["matched"]), f"{i['points']:+g}",
                                 i["text"] + ("" if i["matched"] in (0.0, 1.0) else f" (matched in {i['matched']:.0%} of passes)"))
                                for i in sorted(by_key.get((run, r["case_id"]), []),
                                                key=lambda i: (-i["points"], i["item_id"]))])
                          for run, score in ((x, r["score_a"]), (y, r["score_b"])))
            cases.append(CaseView(f"differ-{slug(x)}-{slug(y)}-{case_anchor(r['case_id'])}", r["case_id"],
                                  r["benchmark"], signed(r["gap"], 2), prompts.get(r["case_id"], ""), sides))
        views.append(PairView(f"differ-{slug(x)}-vs-{slug(y)}", f"{x} vs {y}", cases))
    return views, shown
