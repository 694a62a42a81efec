"""``write_report``: one store, some runs -> ``index.html`` (self-contained), ``report.md``, ``figures/*.png``
and ``tables/*.csv`` in one directory, byte for byte the same for the same store apart from one
generated-at line."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from toolkit.analysis import ResampleSettings
from toolkit.prices import load_prices
from toolkit.protocol import PROTOCOL_VERSION
from toolkit.report import facts, sections, words
from toolkit.report.analyses import Analyses, Timings, analyse
from toolkit.report.differ import differ
from toolkit.report.figs import draw, figure_palette
from toolkit.report.model import Section, run_anchors, slug
from toolkit.report.options import ReportOptions, regenerate_command
from toolkit.report.physicians import physician_section
from toolkit.report.reliability import reliability_section
from toolkit.report.render import render_html, render_markdown
from toolkit.store import Store

GENERATED_PREFIX = "Generated at "  # the one line that differs between two builds of the same store


@dataclass(frozen=True)
class ReportPaths:
    directory: Path
    html: Path
    markdown: Path
    figures: list[Path]
    tables: list[Path]
    timings: dict[str, float]


def default_name(store: Store, run_ids: list[str] | None, title: str | None) -> str:
    """reports/<name>/: the title's slug, else the store's folder name (--all), else the runs'."""
    if title:
        return slug(title)
    if run_ids is None:
        return slug(store.root.resolve().name)
    if len(run_ids) <= 3:
        return "-vs-".join(slug(r) for r in run_ids)
    return f"{len(run_ids)}-runs-{hashlib.sha1(chr(0).join(run_ids).encode()).hexdigest()[:8]}"


def write_report(store: Store | str | os.PathLike[str] | None, run_ids: list[str] | None = None,
                 out: str | os.PathLike[str] | None = None, options: ReportOptions = ReportOptions()) -> ReportPaths:
    """Write the report of ``run_ids`` (None: every run in the store) into ``out`` (default
    ``reports/<name>/`` under the current directory). The directory is replaced as a whole: a
    failed build leaves the previous report (or nothing) in place."""
    store = store if isinstance(store, Store) else Store.open(store)
    chosen = list(dict.fromkeys(run_ids)) if run_ids is not None else store.run_ids()
    if not chosen:
        raise ValueError(f"report: {store.root}: the store has no runs")
    target = Path(out) if out is not None else Path("reports") / default_name(store, run_ids, options.title)
    _check_target(target)
    timings = Timings()
    prices = load_prices(options.prices)  # a bad price table stops here, before anything is read
    a = analyse(store, chosen, ResampleSettings(samples=options.samples, seed=options.seed), options.selection,
                options.baseline, options.allow_mixed, timings, prices)
    anchors = run_anchors(a.data.runs["run_id"].to_list())
    with timings.phase("figures"):
        figure_notes: list[str] = []
        figs = draw(a, figure_notes) if options.figures else {}
    with timings.phase("writing"):
        built = _sections(a, anchors, figs, figure_notes, store, run_ids, options, prices.source)
        paths = _write(target, built, options, a)
    return ReportPaths(**paths, timings=dict(timings.phases))


def _check_target(target: Path) -> None:
    if target.exists() and not target.is_dir():
        raise ValueError(f"report: {target}: not a directory")
    if target.is_dir() and any(target.iterdir()) and not (target / "index.html").is_file():
        raise ValueError(f"report: {target}: exists and is not a report directory (no index.html); "
                         "give a new or empty directory with --out")


def _sections(a: Analyses, anchors: dict[str, str], figs: dict, figure_notes: list[str], store: Store,
              run_ids: list[str] | None, options: ReportOptions, prices: str) -> dict:
    runs = facts.run_rows(a, options.selection)
    sets = facts.dataset_facts(a, options.dataset)
    repro = Section("reproducibility", "Reproducibility", tables=[sections.runs_table(runs, anchors)])
    repro.facts.append(("protocol", PROTOCOL_VERSION))
    for d in sets:
        repro.facts.append(("dataset", f"{d.name} · sha256 {d.sha256} · {d.cases} cases in {d.benchmarks} "
                                       f"benchmarks · {d.runs} run(s)"))
    judge = options.selection
    repro.facts += [
        ("judge selection", f"{judge.judge or 'each run’s own judge'}; passes "
                            f"{', '.join(map(str, judge.passes)) if judge.passes else 'all'}"),
        ("bootstrap", f"{options.samples} samples, seed {options.seed}; rank intervals: stratified by benchmark, "
                      "shared by the ranked runs; reference intervals: reference runner's draws, dataset order for "
                      "collected runs, completion order for imported runs"),
        ("prices", f"{prices} (USD per 1M tokens; unpriced runs show tokens)"),
        ("toolkit", f"bedside {facts.toolkit_version()}"),
        ("store", str(store.root.resolve())),
    ]
    version = facts.store_version(store)
    if version is not None:
        repro.facts.append(("store version", version))
    repro.command = regenerate_command(run_ids, store, options)
    # The answer first: the summary in words and the leaderboard fill the first screen; how it was made comes last.
    named = "; ".join(f"{d.name} (sha256 {d.sha256[:12]}…)" for d in sets)
    out = [Section("summary", "Summary", paragraphs=words.summary(a) + [f"Dataset: {named}."])]
    board = [sections.leaderboard_table(a, anchors, figure_palette(a)), sections.leaderboard_rest_table(a, anchors)]
    out.append(Section("leaderboard", "Leaderboard", figures=figs.get("leaderboard", []),
                       tables=[t for t in board if t is not None], bullets=words.not_ranked_lines(a),
                       paragraphs=[words.interval_line(a)]))
    pair_section = Section("pairwise", "Pairwise comparisons", figures=figs.get("pairwise", []),
                           tables=[sections.pairwise_table(a, anchors)])
    if a.pairs.is_empty():
        pair_section.paragraphs.append("A single run: there is no pair to compare.")
    out.append(pair_section)
    versus = sections.versus_table(a, anchors)
    if versus is not None:
        out.append(Section("versus", "Per benchmark against " + ("the baseline" if a.baseline else "the leader"),
                           tables=[versus]))
    out.append(Section("benchmarks", "Benchmarks", figures=figs.get("benchmarks", []),
                       tables=[sections.benchmarks_table(a, anchors)]))
    out.append(Section("items", "Rubric items", figures=figs.get("items", []), tables=sections.items_tables(a),
                       paragraphs=[] if a.items is not None else [f"Nothing to show: {a.absent.get('items')}"]))
    harm = sections.harms_table(a, anchors)
    out.append(Section("harms", "Harms", figures=figs.get("harms", []), tables=[harm] if harm else [],
                       paragraphs=[] if harm else [f"Nothing to show: {a.absent.get('harms')}"]))
    if a.agreement is not None:
        out.append(Section("judges", "Judges", figures=figs.get("judges", []), tables=sections.judge_tables(a)))
    physicians = physician_section(a)
    if physicians is not None:  # only when the compared runs have physician labels
        out.append(physicians)
    reliability = reliability_section(a.variance, a.absent.get("reliability"), figs.get("reliability", []))
    if reliability is not None:
        out.append(reliability)
    views, shown = differ(a, anchors, options.selection)
    out.append(Section("differ", "Where runs differ most", figures=figs.get("differ", []), pairs=views,
                       paragraphs=["For the top pairs, the cases with the largest score gap. Open a case to read "
                                   "both answers with the rubric items each matched (✓), missed (✗), endorsed (!) "
                                   "or avoided (○)."] if views else ["A single run: nothing to set side by side."]))
    if figs.get("length-cost"):
        out.append(Section("length-cost", "Length and cost", figures=figs["length-cost"]))
    out.append(Section("cases", "Cases", tables=[sections.cases_table(a, anchors)]))
    out.append(repro)
    out.append(Section("method", "Method notes", bullets=words.method_notes(a, options.samples, options.seed)))
    out.append(Section("warnings", "Warnings", bullets=words.warnings(a) + figure_notes or ["None."]))
    extra = {"pairwise_all": sections.with_mdd(a.cmp.pairwise), "ranks": a.cmp.ranks, "differ": shown,
             "excluded": a.cmp.excluded}
    n = a.cmp.leaderboard.height
    title = options.title or f"Comparison of {n} run{'s' if n != 1 else ''}"
    subtitle = ", ".join(a.cmp.leaderboard["run_id"].to_list()[:6]) + (" …" if n > 6 else "")
    return {"sections": out, "extra": extra, "title": title, "subtitle": subtitle}


def _write(target: Path, built: dict, options: ReportOptions, a: Analyses) -> dict:
    """Write everything into a fresh sibling directory, then swap it in."""
    target = target.resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.tmp-{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    (staging / "figures").mkdir(parents=True)
    (staging / "tables").mkdir()
    try:
        now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        context = {k: v for k, v in built.items() if k != "extra"}
        context["generated_line"] = f"{GENERATED_PREFIX}{now} by bedside {facts.toolkit_version()}"
        tables: dict[str, pl.DataFrame] = {}
        figures = []
        for s in built["sections"]:
            for t in s.tables:
                tables[t.key] = t.frame
            for f in s.figures:
                (staging / "figures" / f"{f.key}.png").write_bytes(f.png)
                figures.append(f"{f.key}.png")
                if f.data is not None:
                    tables[f"figure_{f.key}"] = f.data
        tables.update(built["extra"])
        from toolkit.text import write_csv  # formula-like text cells neutralised

        for key, frame in sorted(tables.items()):
            # 12 decimals: far below any reported digit, and above the last-bit noise of a parallel sum whose
            # order can vary between two runs (which would otherwise break byte-for-byte determinism).
            write_csv(frame.with_columns(pl.col(pl.Float64).fill_nan(None)),
                      staging / "tables" / f"{key}.csv", float_precision=12)
        (staging / "index.html").write_text(render_html(context), encoding="utf-8")
        (staging / "report.md").write_text(render_markdown(context), encoding="utf-8")
        if target.exists():
            old = target.parent / f".{target.name}.old-{os.getpid()}"
            target.rename(old)
            staging.rename(target)
            shutil.rmtree(old)
        else:
            staging.rename(target)
    except BaseException as error:
        shutil.rmtree(staging, ignore_errors=True)
        from toolkit.store.disk import is_no_space

        if isinstance(error, Exception) and is_no_space(error):  # polars and numpy say it in their own words
            raise ValueError(f"report: no space left on {target.parent} (nothing was written)") from None
        raise
    return {"directory": target, "html": target / "index.html", "markdown": target / "report.md",
            "figures": [target / "figures" / f for f in figures],
            "tables": [target / "tables" / f"{k}.csv" for k in sorted(tables)]}
