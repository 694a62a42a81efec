"""``bedside compare | items | harms | agreement``: the analyses of ``toolkit.analysis`` as tables.

Each command prints several sections. ``--format table`` prints them all with
titles; ``json`` prints one object {notes, section: records}; ``csv`` prints one
section as plain CSV when ``--section`` names it, else every section after a
``# name`` line.
"""

from __future__ import annotations

import sys
import textwrap
from typing import Callable

import click
import polars as pl

from toolkit.analysis import (AgreementOptions, CompareOptions, HarmOptions, ItemOptions, ResampleSettings,
                              analyse_items, compare_data, harms, judge_agreement)
from toolkit.analysis.compare import INTERVAL_METHODS, leaderboard_order
from toolkit.analysis.harms import BOTH, NOTE as HARM_NOTE
from toolkit.analysis.pairs import METHOD_NOTE as PAIRED_METHOD_NOTE
from toolkit.analysis.paired import small_sample_note
from toolkit.inputs import dumps
from toolkit.protocol import severity_label
from toolkit.cli.common import echo_json, emit, note_line, open_store, selected_runs
from toolkit.cli.options import (RunChoice, allow_mixed_option, check_paired_samples, format_option, judge_options,
                                 prices_option, resample_options, run_options, store_option)
from toolkit.cli.table import COVERAGE, table_fits, terminal_width
from toolkit.selection import RUN_TABLES, JudgeSelection, read_runs, run_tables
from toolkit.text import visible


def section_option(names: tuple[str, ...]) -> Callable:
    return click.option("--section", type=click.Choice(names), default=None,
                        help="Print only this section (plain CSV with --format csv).")


def _p_text(value: float | None) -> str | None:
    if value is None:
        return None
    return f"{value:.4f}" if value >= 1e-4 else f"{value:.1e}"


def _table_view(frame: pl.DataFrame) -> pl.DataFrame:
    """Readable terminal cells: short digests, p-values that stay visible below 1e-4, clipped texts, an
    estimate and its interval in one cell, and the raw p beside the adjusted ones."""
    out = frame
    for name in frame.columns:
        if name == "dataset_sha256":
            out = out.with_columns(pl.col(name).str.slice(0, 12))
        elif name == "text":
            cut = pl.col(name).str.len_chars() > 100  # an ellipsis says the text goes on
            out = out.with_columns(pl.when(cut).then(pl.col(name).str.slice(0, 99) + "…")
                                   .otherwise(pl.col(name)).alias(name))
        elif (name.startswith("p_") or name.endswith("_p")) and frame.schema[name] == pl.Float64:
            out = out.with_columns(pl.col(name).map_elements(_p_text, return_dtype=pl.String))
    if "severity_class" in frame.columns:  # a class in words: "class 9 = +3 points, essential"
        out = out.with_columns(pl.col("severity_class").map_elements(severity_label, return_dtype=pl.String))
    estimate = next((c for c in ESTIMATES if c in frame.columns), None)
    if estimate is not None and {"ci_low", "ci_high"} <= set(frame.columns):
        note = "ci_note" if "ci_note" in frame.columns else None
        out = out.with_columns(_interval_cell(estimate, note).alias(estimate)).drop("ci_low", "ci_high", note or [])
        out = out.rename({estimate: f"{estimate} [95% {_method(frame)}]"}).drop("ci_method", strict=False)
    counts = ("wins", "ties", "losses")  # one cell: shown or left out together
    if set(counts) <= set(out.columns):
        out = out.with_columns(pl.format("{} / {} / {}", *counts).alias("wins")).rename({"wins": OUTCOMES})
        out = out.drop("ties", "losses")
    counts = ("completed", "failed", "not_attempted")
    if set(counts) <= set(out.columns):
        out = out.with_columns(pl.format("{} / {} / {}", *counts).alias("completed")).rename({"completed": COVERAGE})
        out = out.drop("failed", "not_attempted")
    if {"p_value", "p_holm"} <= set(out.columns):
        order = [c for c in out.columns if c != "p_value"]
        order.insert(order.index("p_holm"), "p_value")
        out = out.select(order)
    return out


ESTIMATES = ("overall", "delta", "mean", "value")  # the number a row's ci_low and ci_high are about
OUTCOMES = "wins / ties / losses"  # a pair's case-level outcomes in one cell


def _method(frame: pl.DataFrame) -> str:
    """The interval's method for a header ("stratified t"), or "ci" when the frame does not name one."""
    methods = frame["ci_method"].unique().to_list() if "ci_method" in frame.columns else []
    return methods[0] if len(methods) == 1 and methods[0] else "ci"


def _fixed(value: float | None) -> str:
    return f"{value:.3f}"


def _interval_cell(value: str, note: str | None = None) -> pl.Expr:
    """"0.856 [0.823, 0.886]": three decimals each; without an interval, the estimate and the reason
    (``note``: "1.000 [no variation between cases: no interval]"), else the estimate alone."""
    text = [pl.col(c).map_elements(_fixed, return_dtype=pl.String) for c in (value, "ci_low", "ci_high")]
    both = pl.col("ci_low").is_not_null() & pl.col("ci_high").is_not_null() & pl.col("ci_low").is_not_nan() \
        & pl.col("ci_high").is_not_nan()
    alone = text[0] if note is None else pl.when(pl.col(note).is_not_null() & (pl.col(note) != "")).then(
        pl.format("{} [{}]", text[0], pl.col(note))).otherwise(text[0])
    return pl.when(both).then(pl.format("{} [{}, {}]", *text)).otherwise(alone)


def emit_sections(sections: dict[str, pl.DataFrame], fmt: str, section: str | None, notes: list[str],
                  views: dict[str, list[tuple[str, pl.DataFrame]]] | None = None) -> None:
    """Print the sections; in table format a section may be shown as other tables (``views``: titled
    frames), and the notes follow the tables on stderr, one line each. A section no view names is
    printed as it is, its columns chosen by the table's width rules."""
    chosen = {section: sections[section]} if section else sections
    clean = {name: frame.with_columns(pl.col(pl.Float64).fill_nan(None)) for name, frame in chosen.items()}
    if fmt == "json":
        echo_json(dumps({"notes": notes, **{n: f.to_dicts() for n, f in clean.items()}}, indent=2, default=str))
        return
    if fmt == "csv":
        from toolkit.text import write_csv

        for note in notes:
            note_line(note)
        for name, frame in clean.items():
            if len(clean) > 1:
                sys.stdout.write(f"# {name}\n")
            sys.stdout.write(write_csv(frame))  # formula-like text cells neutralised
            if len(clean) > 1:
                sys.stdout.write("\n")
        return
    for name, frame in clean.items():
        for title, shown in (views or {}).get(name, [(name, frame)]):
            if shown.height:
                emit(_table_view(shown.with_columns(pl.col(pl.Float64).fill_nan(None))), "table", title=title,
                     derived=DERIVED)
    sys.stdout.flush()  # the tables before the notes when both streams go to one terminal
    for note in notes:
        note_line(note)


DERIVED = {"miss_rate": "1 - match_rate"}  # left out first at narrow widths, named with the formula


def _benchmark_view(benchmarks: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    """Benchmarks down and runs across when that fits the terminal, else one row per benchmark x run."""
    runs = benchmarks["run_id"].unique(maintain_order=True).to_list()
    cells = benchmarks.with_columns(cell=_interval_cell("mean", "ci_note" if "ci_note" in benchmarks.columns
                                                        else None))
    grid = cells.pivot(on="run_id", index="benchmark", values="cell", aggregate_function="first")
    if table_fits(grid.select("benchmark", *runs)):
        return [(f"benchmarks (mean [95% {_method(benchmarks)}])", grid)]
    order = {b: i for i, b in enumerate(benchmarks["benchmark"].unique(maintain_order=True).to_list())}
    long = benchmarks.with_columns(_order=pl.col("benchmark").replace_strict(order, return_dtype=pl.Int64))
    return [("benchmarks", long.sort("_order", maintain_order=True).drop("_order")
             .select("benchmark", "run_id", pl.exclude("benchmark", "run_id")))]


HARM_METRICS = ("f1", "severe_omission_case_rate", "severe_commission_case_rate", "precision", "recall",
                "omission_share_weighted", "commission_share_weighted", "omission_share_severe",
                "severe_omissions_per_item", "severe_commissions_per_item", "severe_rate")


def _harm_view(frame: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    """One table per scope, a row per run, a column per metric (the harm rates first after F1)."""
    cells = frame.with_columns(cell=_interval_cell("value", "ci_note" if "ci_note" in frame.columns else None))
    metrics = frame["metric"].unique(maintain_order=True).to_list()
    order = [m for m in HARM_METRICS if m in metrics] + [m for m in metrics if m not in HARM_METRICS]
    out = []
    for scope in frame["scope"].unique(maintain_order=True).to_list():
        grid = cells.filter(pl.col("scope") == scope).pivot(on="metric", index="run_id", values="cell",
                                                            aggregate_function="first")
        out.append((f"harms: {scope} (value [95% ci])", grid.select("run_id", *(m for m in order if m in grid.columns))))
    return out


@click.command("compare")
@run_options
@click.option("--benchmarks", "per_benchmark", is_flag=True,
              help="Pairwise rows per benchmark too (Holm/BH over those rows: their own family).")
@click.option("--baseline", default=None,
              help="Pair every other ranked run with this one (delta = run - baseline; Holm over those pairs).")
@allow_mixed_option
@section_option(("leaderboard", "not_ranked", "benchmarks", "pairwise", "versus", "ranks", "separability",
                 "excluded"))
@judge_options()
@resample_options()
@format_option
@store_option
@prices_option
def compare_cmd(runs: RunChoice, per_benchmark: bool, baseline: str | None, allow_mixed: bool, section: str | None,
                selection: JudgeSelection, samples: int, seed: int, fmt: str, store_dir: str | None,
                prices_file: str | None) -> None:
    """Leaderboard with intervals, paired differences of every two runs (Holm/BH-adjusted p) and rank intervals."""
    check_paired_samples(samples, "compare")
    from toolkit.prices import load_prices

    prices = load_prices(prices_file)  # a bad table stops here, before anything is read
    store = open_store(store_dir)
    # Under the default selection the stored scores and passes are all compare needs of the decisions.
    decisions = not selection.is_stored or bool(store.unscored())
    data = read_runs(store, selected_runs(store, runs, run_tables(decisions, passes=True)), texts=False,
                     decisions=decisions, passes=True)
    options = CompareOptions(resamples=ResampleSettings(samples=samples, seed=seed), per_benchmark=per_benchmark,
                             allow_mixed=allow_mixed, selection=selection, baseline=baseline)
    result = compare_data(data, options)
    order = result.run_order(data.runs["run_id"].to_list())
    sections = result.sections()
    if not per_benchmark and section != "versus":
        sections.pop("versus")  # each run against the leader per benchmark: --benchmarks, or asked for by name
    shown = [section] if section else list(sections)
    notes = result.notes_for(shown) + [note for about, note in (
        (("ranks",), f"{samples} paired resamples (seed {seed}) shared by the rank intervals"),
        (("pairwise", "versus"), PAIRED_METHOD_NOTE),
        (("leaderboard", "not_ranked"), _cost_note(data, prices, order))) if set(about) & set(shown)]
    sections = {name: _with_method(frame, INTERVAL_METHODS.get(name)) for name, frame in sections.items()}
    if fmt == "table" and (section is None or section == "leaderboard"):
        from toolkit.report.words import verdict  # the report summary's own first lines

        for line in verdict(result):  # wrapped as the tables below are: to the terminal's width
            click.echo("\n".join(textwrap.wrap(visible(line), terminal_width(), break_on_hyphens=False)))
    views = {"benchmarks": _benchmark_view(sections["benchmarks"])}
    if "versus" in sections and sections["versus"].height:
        views["versus"] = _versus_view(sections["versus"])
    emit_sections(sections, fmt, section, notes, views=views)


def _with_method(frame: pl.DataFrame, method: str | None) -> pl.DataFrame:
    """``frame`` with the name of its interval's method (ci_method) after the interval, where it has one."""
    if method is None or "ci_high" not in frame.columns:
        return frame
    after = "ci_note" if "ci_note" in frame.columns else "ci_high"
    columns = frame.columns
    at = columns.index(after) + 1
    return frame.with_columns(ci_method=pl.lit(method, dtype=pl.String)).select(
        *columns[:at], "ci_method", *columns[at:])


def _versus_view(versus: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    """The per-benchmark rows against one reference: the reference and the family (one value each) go into
    the title rather than a cell repeated (and wrapped) on every row."""
    reference = versus["reference"].unique().to_list()
    if len(reference) != 1:
        return [("versus", versus)]
    return [(f"versus: each run - {reference[0]} per benchmark (Holm/BH over these {versus.height} rows)",
             versus.drop("reference", "family"))]


def _cost_note(data, prices, order: list[str]) -> str:
    """What each compared run cost, in leaderboard order: dollars where priced, else tokens (analysis.costs)."""
    from toolkit.analysis.costs import run_costs

    cost = dict(run_costs(data, prices).select("run_id", "cost").iter_rows())
    runs = [r for r in order if r in cost] + [r for r in cost if r not in order]
    return f"cost (prices: {prices.source}): " + "; ".join(f"{r} {cost[r]}" for r in runs)


@click.command("items")
@run_options
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="Rows per top list.")
@click.option("--benchmark", default=None, help="Only this benchmark's items.")
@click.option("--ci", is_flag=True, help="Add intervals (cases resampled whole; Wilson for single items).")
@section_option(("missed", "endorsed", "discriminating", "by_points", "runs", "items", "item_runs"))
@judge_options()
@resample_options()
@format_option
@store_option
def items_cmd(runs: RunChoice, top: int, benchmark: str | None, ci: bool, section: str | None,
              selection: JudgeSelection, samples: int, seed: int, fmt: str, store_dir: str | None) -> None:
    """Rubric items: most missed positive items, most endorsed negative items, match rates by points,
    and item discrimination across runs."""
    store = open_store(store_dir)
    data = read_runs(store, selected_runs(store, runs, RUN_TABLES), texts=False)
    options = ItemOptions(selection=selection, benchmark=benchmark, top=top,
                          resamples=ResampleSettings(samples=samples, seed=seed) if ci else None)
    result = analyse_items(data, options)
    sections = result.sections()
    if section is None:
        sections.pop("item_runs")  # one row per run x item: only when asked for by name
        if fmt == "table":
            sections.pop("items")  # the full item list: csv/json or --section items
    notes = ["discrimination = correlation across runs of the item's match with the run's overall score"]
    emit_sections(sections, fmt, section, notes)


@click.command("harms")
@run_options
@section_option(("harms",))
@judge_options()
@resample_options()
@format_option
@store_option
def harms_cmd(runs: RunChoice, section: str | None, selection: JudgeSelection, samples: int, seed: int, fmt: str,
              store_dir: str | None) -> None:
    """Harm analysis of the f1_weighted_rubric benchmarks: weighted precision/recall, severe omissions and
    commissions, omission vs commission share of errors, with intervals."""
    store = open_store(store_dir)
    data = read_runs(store, selected_runs(store, runs, RUN_TABLES), texts=False)
    frame = harms(data, HarmOptions(selection=selection, resamples=ResampleSettings(samples=samples, seed=seed)))
    order = {run: i for i, run in enumerate(leaderboard_order(data, selection))}
    frame = frame.sort(pl.col("run_id").replace_strict(order, default=len(order), return_dtype=pl.Int64),
                       maintain_order=True)  # runs in leaderboard order, as in every table and figure
    # A run's cases in one F1 benchmark (the f1 metric counts every completed case).
    smallest = frame.filter((pl.col("scope") != BOTH) & (pl.col("metric") == "f1"))["n_cases"].min()
    notes = ["value [95% interval], cases resampled within benchmark", HARM_NOTE] + small_sample_note(smallest, paired=False)
    emit_sections({"harms": frame}, fmt, section, notes, views={"harms": _harm_view(frame)})


@click.command("agreement")
@run_options
@judge_options(judge_help="Only this judge's passes (default: every judge of the run).",
               pass_help="Judge pass(es) to include (default: all).")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="Cases in the flips list.")
@section_option(("summary", "pairs", "scores", "flips"))
@resample_options()
@format_option
@store_option
def agreement_cmd(runs: RunChoice, selection: JudgeSelection, top: int, section: str | None, samples: int, seed: int,
                  fmt: str, store_dir: str | None) -> None:
    """Agreement between the judge passes / judges of each run: percent agreement, Cohen's and Fleiss'
    kappa, Krippendorff's alpha, score differences and the cases that flip most."""
    check_paired_samples(samples, "agreement")
    store = open_store(store_dir)
    data = read_runs(store, selected_runs(store, runs, RUN_TABLES), texts=False)
    result = judge_agreement(data, AgreementOptions(judge=selection.judge, passes=selection.passes,
                                                    resamples=ResampleSettings(samples=samples, seed=seed), top=top))
    notes = [f"run {r} has a single rater and is left out" for r in result.skipped] + result.notes
    scores = result.scores
    views = {}
    if section is None and "overall" in scores["benchmark"].to_list():  # a row per benchmark: --section scores
        views["scores"] = [("scores (overall; --section scores: each benchmark)",
                            scores.filter(pl.col("benchmark") == "overall"))]
    elif scores.height:  # one table per run and rater pair, benchmarks down: the numbers fit 80 columns
        views["scores"] = [(f"scores: {run}, {a} - {b}", rows.drop("run_id", "rater_a", "rater_b", "family"))
                           for (run, a, b), rows in scores.group_by("run_id", "rater_a", "rater_b",
                                                                     maintain_order=True)]
    emit_sections(result.sections(), fmt, section, notes, views=views)
