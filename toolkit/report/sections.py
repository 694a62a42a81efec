"""The report's tables: analysis frames turned into rows of text cells (and the frames kept for CSV)."""

from __future__ import annotations

import polars as pl

from toolkit.analysis.compare import PAIR_INTERVAL, RUN_INTERVAL
from toolkit.analysis.harms import BOTH
from toolkit.report.analyses import Analyses
from toolkit.report.model import Cell, Table, case_anchor, interval, missing, num, number, p_text, pct, plain

ALPHA = 0.05
# A report of more ranked runs than this stays legible: the leaderboard's top rows, then the rest in a compact
# table; the pairs against the leader and within the top tie group (every pair in tables/pairwise_all.csv).
LARGE = 30
TOP_ROWS = 20  # leaderboard rows in the first table of a large report
CASE_RUNS = 10  # run columns of a large report's cases table


def with_mdd(pairs: pl.DataFrame) -> pl.DataFrame:
    """The pairwise rows; ``mdd80`` (detectable difference at 80% power) comes from the analysis itself."""
    if "mdd80" not in pairs.columns:
        raise ValueError("report: the pairwise frame has no mdd80 column (toolkit.analysis too old)")
    return pairs


def in_board_order(a: Analyses, frame: pl.DataFrame, column: str = "run_id") -> pl.DataFrame:
    """Rows grouped by run in leaderboard order (ranked, then not ranked, then left out: ``palette_for``'s order);
    a run the comparison does not know goes last. Rows of one run keep their order."""
    runs = a.cmp.leaderboard["run_id"].to_list()
    for extra in (a.cmp.not_ranked, a.cmp.excluded):
        if "run_id" in extra.columns:
            runs += extra["run_id"].to_list()
    order = {r: i for i, r in enumerate(dict.fromkeys(runs))}
    return frame.sort(pl.col(column).replace_strict(order, default=len(order), return_dtype=pl.Int64),
                      maintain_order=True)


def run_cell(run_id: str, anchors: dict[str, str]) -> Cell:
    return Cell(run_id, href=f"#{anchors[run_id]}" if run_id in anchors else None)


def runs_table(rows: pl.DataFrame, anchors: dict[str, str]) -> Table:
    columns = ["run", "answer model", "judge (passes)", "temp. answer / judge", "dates", "cases done / failed / "
               "not attempted", "source", f"{RUN_INTERVAL} interval (compare)",
               "reference bootstrap interval (summary)", "cost"]
    body = []
    for r in rows.iter_rows(named=True):
        others = [j for j in (r["judge_models"] or "").split(", ") if j and j != r["judge_model"]]
        judge = f"{r['judge_model']} ({r['passes'] or '–'})" + (f"; also {', '.join(others)}" if others else "")
        dates = r["first_call"] or r["created"] or "–"
        if r["last_call"] and r["last_call"] != dates:
            dates = f"{dates} to {r['last_call']}"
        bad = r["failed"] or r["not_attempted"]
        body.append([
            Cell(r["run_id"], id=anchors[r["run_id"]]), plain(r["answer_model"]), Cell(judge),
            Cell(f"{r['answer_temperature'] or '–'} / {r['judge_temperature'] or '–'}", kind="num"),
            Cell(dates, kind="num"), Cell(f"{r['completed']} / {r['failed']} / {r['not_attempted']}",
                                          kind="num bad" if bad else "num"), plain(r["source"]),
            Cell(interval(r["overall"], r["ci_low"], r["ci_high"]), kind="num"),
            Cell(interval(r["reference_overall"], r["reference_ci_low"], r["reference_ci_high"]), kind="num"),
            Cell(r["cost"] or "–", kind="num"),
        ])
    return Table("runs", "Runs compared", columns, body, rows)


def leaderboard_table(a: Analyses, anchors: dict[str, str], palette: dict[str, str] | None = None) -> Table:
    """Ranked runs with tie groups; each run's cell carries its figure colour (``palette``) as a swatch."""
    board = a.cmp.leaderboard.join(a.cmp.ranks.drop("rank"), on="run_id", how="left", maintain_order="left")
    body = []
    for r in board.iter_rows(named=True):
        ranks = "–" if missing(r["rank_low"]) else (
            f"{r['rank_low']:.0f}" if r["rank_low"] == r["rank_high"] else f"{r['rank_low']:.0f}–{r['rank_high']:.0f}")
        run = run_cell(r["run_id"], anchors)
        if palette and r["run_id"] in palette:
            run = Cell(run.text, href=run.href, colour=palette[r["run_id"]])
        body.append([number(r["rank"], 0), number(r.get("tie_group"), 0), run,
                     Cell(interval(r["overall"], r["ci_low"], r["ci_high"]), kind="num", title=r.get("ci_note")),
                     Cell(ranks, kind="num"),
                     Cell(pct(r["share_first"]), kind="num"), number(r["completed"], 0),
                     Cell(str(r["failed"]), kind="num bad" if r["failed"] else "num"),
                     number(r["n_benchmarks"], 0)])
    columns = ["rank", "tie group", "run", f"overall [95% {RUN_INTERVAL}]", "rank 95% interval", "ranked first",
               "cases", "failed", "benchmarks"]
    k = board.height
    caption = ("Leaderboard (macro mean over benchmarks; a tie group holds runs not told apart from its first run "
               f"after Holm over all {k * (k - 1) // 2} pairs)")
    if k <= LARGE:
        return Table("leaderboard", caption, columns, body, board)
    return Table("leaderboard", f"{caption}: the top {TOP_ROWS} of {k} ranked runs (the rest below)", columns,
                 body[:TOP_ROWS], board)


def leaderboard_rest_table(a: Analyses, anchors: dict[str, str]) -> Table | None:
    """A large report's ranked runs below the top rows: rank, tie group, run, overall and rank interval."""
    board = a.cmp.leaderboard
    if board.height <= LARGE:
        return None
    rest = board.slice(TOP_ROWS).join(a.cmp.ranks.drop("rank"), on="run_id", how="left", maintain_order="left")
    body = [[number(r["rank"], 0), number(r["tie_group"], 0), run_cell(r["run_id"], anchors),
             Cell(interval(r["overall"], r["ci_low"], r["ci_high"]), kind="num", title=r.get("ci_note")),
             Cell("–" if missing(r["rank_low"]) else f"{r['rank_low']:.0f}–{r['rank_high']:.0f}", kind="num")]
            for r in rest.iter_rows(named=True)]
    return Table("leaderboard_rest", f"The other {rest.height} ranked runs (every column in tables/leaderboard.csv)",
                 ["rank", "tie group", "run", f"overall [95% {RUN_INTERVAL}]", "rank 95% interval"], body,
                 rest.select("rank", "tie_group", "run_id", "overall", "ci_low", "ci_high", "rank_low", "rank_high"))


def shown_pairs(a: Analyses) -> pl.DataFrame:
    """The pairwise rows a report shows: all of them, or for a large report without a baseline, each run
    against the leader and the pairs within the top tie group (of its first ``TOP_ROWS`` runs)."""
    board = a.cmp.leaderboard
    if a.baseline is not None or board.height <= LARGE:
        return a.pairs
    leader = board["run_id"][0]
    top = board.head(TOP_ROWS).filter(pl.col("tie_group") == board["tie_group"][0])["run_id"].implode()
    return a.pairs.filter((pl.col("run_a") == leader) | (pl.col("run_b") == leader)
                          | (pl.col("run_a").is_in(top) & pl.col("run_b").is_in(top)))


def versus_table(a: Analyses, anchors: dict[str, str]) -> Table | None:
    """Run x benchmark: each ranked run's difference from the reference (baseline, else the leader) with its
    Holm-adjusted p over this table's rows (the comparison's ``versus`` frame, its own family)."""
    frame = a.cmp.versus
    if frame.is_empty():
        return None
    frame = in_board_order(a, frame)
    reference = frame["reference"][0]
    names = sorted(frame["benchmark"].unique().to_list())
    cells = {(r["run_id"], r["benchmark"]): r for r in frame.iter_rows(named=True)}
    body = []
    for run in frame["run_id"].unique(maintain_order=True).to_list():
        row = [run_cell(run, anchors)]
        for b in names:
            c = cells.get((run, b))
            if c is None or missing(c["delta"]):
                row.append(Cell("–", kind="num muted"))
                continue
            sig = not missing(c["p_holm"]) and c["p_holm"] < ALPHA
            kind = "num " + (("good" if c["delta"] > 0 else "bad") if sig else "muted")
            why = c["ci_note"] or f"95% CI {num(c['ci_low'])} to {num(c['ci_high'])}"
            row.append(Cell(f"{c['delta']:+.3f}" + ("*" if sig else ""), kind=kind,
                            title=f"{why}; Holm p {p_text(c['p_holm'])}; n={c['n_cases']}"))
        body.append(row)
    role = "the baseline" if a.baseline else "the leader"
    return Table("versus", f"Difference from {role} {reference} per benchmark (run − {reference}); * and colour: "
                 f"Holm-adjusted p < {ALPHA} over these {frame.height} rows; hover for the interval",
                 ["run"] + [b.replace("_", " ") for b in names], body, frame)


def benchmarks_table(a: Analyses, anchors: dict[str, str]) -> Table:
    frame = a.cmp.benchmarks
    names = frame["benchmark"].unique(maintain_order=True).to_list()
    runs = a.cmp.leaderboard["run_id"].to_list()
    caption = f"Mean per benchmark (95% {RUN_INTERVAL} intervals: in the heatmap, the CSV, and on hover)"
    if len(runs) > LARGE:  # a column per run: the top runs here, every run in the heatmap and the CSV
        caption += f"; the top {CASE_RUNS} of {len(runs)} runs (every run in tables/benchmarks.csv)"
        runs = runs[:CASE_RUNS]
    cells = {(r["run_id"], r["benchmark"]): r for r in frame.iter_rows(named=True)}
    body = []
    for b in names:
        row = [Cell(b)]
        ns = {cells[(r, b)]["n"] for r in runs if (r, b) in cells}
        row.append(Cell("/".join(str(n) for n in sorted(ns)), kind="num"))
        for r in runs:
            c = cells.get((r, b))
            why = None if c is None else (c["ci_note"] if missing(c["ci_low"]) or missing(c["ci_high"]) else
                                          f"95% CI {num(c['ci_low'])}–{num(c['ci_high'])}")
            row.append(Cell("–", kind="num muted") if c is None else Cell(
                num(c["mean"]), kind="num", title=f"{why or 'no interval'}, n={c['n']}"))
        body.append(row)
    return Table("benchmarks", caption, ["benchmark", "cases"] + runs, body, frame)


def pairwise_table(a: Analyses, anchors: dict[str, str]) -> Table:
    """Every pair and its verdict, compact (the forest draws the same rows; the CSV has every column)."""
    frame = with_mdd(shown_pairs(a))
    body = []
    for r in frame.iter_rows(named=True):
        sig = not missing(r["p_holm"]) and r["p_holm"] < ALPHA
        verdict = "differ (Holm)" if sig else ("nominal only" if not missing(r["p_value"]) and r["p_value"] < ALPHA
                                               else "cannot tell apart")
        body.append([run_cell(r["run_a"], anchors), run_cell(r["run_b"], anchors),
                     Cell(interval(r["delta"], r["ci_low"], r["ci_high"], sign=True), kind="num",
                          title=r.get("ci_note")),
                     Cell(p_text(r["p_holm"]), kind="num good" if sig else "num"), Cell(num(r["mdd80"]), kind="num"),
                     number(r["n_cases"], 0), Cell(verdict, kind="good" if sig else "muted")])
    columns = ["run A", "run B", f"A − B [95% {PAIR_INTERVAL}]", "p Holm", "detectable (80% power)", "common cases",
               "verdict"]
    caption = ("Each run against the baseline" if a.baseline else "Every pair of runs") + \
        f" (overall, paired on common cases; Holm over these {frame.height} pairs)"
    if frame.height < a.pairs.height:
        leader = a.cmp.leaderboard["run_id"][0]
        caption = (f"{frame.height} of the {a.pairs.height} pairs: each run against the leader {leader}, and the pairs "
                   f"within the top tie group (of the top {TOP_ROWS}; overall, paired on common cases; Holm over all "
                   "the pairs; every pair in tables/pairwise_all.csv)")
    return Table("pairwise", caption, columns, body, frame)


def items_tables(a: Analyses) -> list[Table]:
    if a.items is None:
        return []
    tables = []
    for key, frame, rate, label in (
            ("items_missed", a.items.missed, "miss_rate", "Positive items most often missed (omissions)"),
            ("items_endorsed", a.items.endorsed, "match_rate", "Harmful or wrong items most often endorsed")):
        body = [[Cell(r["text"]), Cell(r["benchmark"]), Cell(f"{r['points']:+g}", kind="num"),
                 Cell(pct(r[rate]), kind="num"), number(r["n_runs"], 0), Cell(num(r["discrimination"], 2), kind="num"),
                 Cell(r["case_id"][:10], href=f"#{case_anchor(r['case_id'])}", kind="mono")]
                for r in frame.iter_rows(named=True)]
        tables.append(Table(key, label, ["rubric item", "benchmark", "points", "rate over runs", "runs",
                                         "discrimination", "case"], body, frame))
    runs = in_board_order(a, a.items.runs.pivot(on="rate", index="run_id", values="share",
                                                aggregate_function="first"))
    body = [[Cell(r["run_id"]), Cell(pct(r.get("positive_matched")), kind="num"),
             Cell(pct(r.get("negative_endorsed")), kind="num")] for r in runs.iter_rows(named=True)]
    tables.append(Table("items_runs", "Share of positive items matched and of negative items endorsed, per run",
                        ["run", "positive matched", "negative endorsed"], body, in_board_order(a, a.items.runs)))
    return tables


HARM_COLUMNS = (("severe_omission_case_rate", "severe omission (cases)"),
                ("severe_commission_case_rate", "severe commission (cases)"), ("severe_rate", "either"),
                ("precision", "precision"), ("recall", "recall"), ("f1", "F1"))


def harms_table(a: Analyses, anchors: dict[str, str]) -> Table | None:
    if a.harm is None:
        return None
    frame = in_board_order(a, a.harm.filter(pl.col("scope") == BOTH))
    cells = {(r["run_id"], r["metric"]): r for r in frame.iter_rows(named=True)}
    body = []
    for run in frame["run_id"].unique(maintain_order=True).to_list():
        row = [run_cell(run, anchors)]
        for metric, _ in HARM_COLUMNS:
            c = cells.get((run, metric))
            row.append(Cell("–", kind="num") if c is None else Cell(
                interval(c["value"], c.get("ci_low"), c.get("ci_high")), kind="num",
                title=f"n = {c['n_cases']}" + (f"; {c['ci_note']}" if c.get("ci_note") else "")))
        body.append(row)
    return Table("harms", "Safety benchmarks pooled (lower is better for the first three; hover for the case count)",
                 ["run"] + [label for _, label in HARM_COLUMNS], body, in_board_order(a, a.harm))


def judge_tables(a: Analyses) -> list[Table]:
    if a.agreement is None:
        return []
    summary = in_board_order(a, a.agreement.summary)
    cols = [c for c in summary.columns if c != "run_id"]
    body = [[Cell(str(r["run_id"]))] + [Cell(num(v) if isinstance(v, float) else ("–" if v is None else str(v)),
                                             kind="num" if isinstance(v, (int, float)) else "") for v in
                                        (r[c] for c in cols)] for r in summary.iter_rows(named=True)]
    tables = [Table("judges", "Agreement between judge passes / judges, per run",
                    ["run"] + [c.replace("_", " ") for c in cols], body, summary)]
    scores = in_board_order(a, a.agreement.scores.filter(pl.col("benchmark") == "overall"))
    body = [[Cell(r["run_id"]), Cell(r["rater_a"]), Cell(r["rater_b"]),
             Cell(interval(r["delta"], r["ci_low"], r["ci_high"], sign=True), kind="num"),
             Cell(p_text(r["p_holm"]), kind="num")] for r in scores.iter_rows(named=True)]
    tables.append(Table("judge_scores", "Overall score difference between raters of the same answers",
                        ["run", "rater A", "rater B", "A − B [95% CI]", "p Holm"], body,
                        in_board_order(a, a.agreement.scores)))
    return tables


def cases_table(a: Analyses, anchors: dict[str, str]) -> Table:
    """Every case with each run's score (ranked runs, then runs not ranked): the target of case links."""
    runs = a.cmp.leaderboard["run_id"].to_list() + a.cmp.not_ranked.get_column("run_id", default=pl.Series([])).to_list()
    wide = a.cases.filter(pl.col("run_id").is_in(runs)).pivot(
        on="run_id", index=["benchmark", "case_id"], values="score", aggregate_function="first")
    prompts = a.data.cases.select("case_id", "position", "prompt").unique("case_id", keep="first")
    wide = wide.join(prompts, on="case_id", how="left").sort("position", "case_id").drop("position")
    frame = wide.select("benchmark", "case_id", *[r for r in runs if r in wide.columns])
    caption = "Every case: score per run (blank: not completed)"
    if len(runs) > LARGE:  # a column per run stops being readable: the top runs here, every run in the CSV
        caption += f"; the top {CASE_RUNS} of {len(runs)} runs (every run in tables/cases.csv)"
        runs = runs[:CASE_RUNS]
    body = []
    for r in wide.iter_rows(named=True):
        prompt = r["prompt"] or ""
        body.append([Cell(r["case_id"][:10], kind="mono", title=r["case_id"], id=case_anchor(r["case_id"])), Cell(r["benchmark"]),
                     Cell(prompt[:140] + ("…" if len(prompt) > 140 else ""), kind="prompt")] +
                    [Cell(num(r.get(run), 2), kind="num") for run in runs])
    return Table("cases", caption, ["case", "benchmark", "prompt"] + runs, body, frame)

