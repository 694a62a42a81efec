"""``bedside calibrate``: the judge against physician labels and the runs' scores corrected by them
(``toolkit.analysis.physicians``) as tables, CSV or JSON.

JSON: {notes, agreement, physician_agreement, corrected: {runs, differences}, rates, judge_errors, plan};
every corrected estimate has ``mean``, ``ci_low`` and ``ci_high``, the macro mean over benchmarks is the
row whose benchmark is ``overall``.
"""

from __future__ import annotations

import sys

import click

from toolkit.cli.analysis import emit_sections, section_option
from toolkit.cli.common import CommandError, echo_json, emit, note_line, open_store, selected_runs
from toolkit.cli.options import (RunChoice, format_option, judge_options, resample_options, run_options,
                                 store_option)

SECTIONS = ("agreement", "physician_agreement", "corrected", "differences", "rates", "judge_errors", "plan")


def _cell(value: float | None, low: float | None, high: float | None, note: str | None = None) -> str:
    """"0.712 [0.650, 0.774]"; the note's reason in a word or two (the notes below the tables say the rest)."""
    if value is None:
        return "not correctable" if note and "correctable" in note else "–"
    if low is None or high is None:
        return f"{value:.3f}" + (" (no interval)" if note else "")
    return f"{value:.3f} [{low:.3f}, {high:.3f}]" + (" (clipped)" if note and "clipped" in note else "")


def _accuracy_view(frame):
    import polars as pl

    rows = []
    for r in frame.iter_rows(named=True):
        row = {"item_class": r["item_class"], "items": r["items"]}
        if "unsure" in r:
            row["unsure"] = r["unsure"]
            for name in ("sensitivity", "specificity"):
                row[name] = _cell(r[name], r[f"{name}_low"], r[f"{name}_high"])
            row["agreement"] = _cell(r["agreement"], r["agreement_low"], r["agreement_high"])
        else:
            row["agreement"] = _cell(r["agreement"], None, None)
        row["kappa"] = _cell(r["kappa"], r["kappa_low"], r["kappa_high"])
        rows.append(row)
    return pl.DataFrame(rows)


def _estimate_view(frame, keys: tuple[str, ...]):
    import polars as pl

    return pl.DataFrame([{**{k: r[k] for k in keys}, "judge only": _cell(r["judge_mean"], None, None),
                          "corrected [95% ci]": _cell(r["mean"], r["ci_low"], r["ci_high"], r["ci_note"]),
                          "labelled_cases": r["labelled_cases"], "labels": r["labels"], "cases": r["cases"]}
                         for r in frame.iter_rows(named=True)])


def _rate_view(frame):
    import polars as pl

    return pl.DataFrame([{"run_id": r["run_id"], "item_class": r["item_class"], "items": r["items"],
                          "judge rate": _cell(r["judge_rate"], None, None),
                          "corrected [95% ci]": _cell(r["rate"], r["ci_low"], r["ci_high"], r["ci_note"]),
                          "harm": r["harm"] or "",
                          "accuracy from": r["accuracy_from"] + (" (against its labels)" if r["against_labels"] else "")}
                         for r in frame.iter_rows(named=True)])


def _views(check, section: str | None) -> dict:
    import polars as pl

    from toolkit.analysis.physicians import OVERALL

    corrected, differences = check.corrected, check.differences
    detail = section is not None  # a section asked for by name shows every benchmark
    if not detail:
        corrected = corrected.filter(pl.col("benchmark") == OVERALL)
        differences = differences.filter(pl.col("benchmark") == OVERALL)
    suffix = "" if detail else " (overall; --section {}: each benchmark)"
    views = {
        "agreement": [("judge vs physicians (value [95% ci])", _accuracy_view(check.agreement))],
        "physician_agreement": [("physician vs physician: the ceiling (double-graded items)",
                                 _accuracy_view(check.physician_agreement))]
        if check.physician_agreement.height else [],
        "corrected": [("corrected means" + suffix.format("corrected"),
                       _estimate_view(corrected, ("run_id", "benchmark")))],
        "differences": [("corrected differences (run_a - run_b)" + suffix.format("differences"),
                         _estimate_view(differences, ("run_a", "run_b", "benchmark")))] if differences.height else [],
        "rates": [("item match rates corrected per class (Rogan-Gladen)", _rate_view(check.rates))],
        "judge_errors": [("items the judge gets wrong most often", check.judge_errors)],
        "plan": [("labelled cases to halve the corrected overall interval", check.plan)],
    }
    return views


def _json(check) -> dict:
    def records(frame):
        import polars as pl

        return frame.with_columns(pl.col(pl.Float64).fill_nan(None)).to_dicts()

    return {"notes": check.notes, "agreement": records(check.agreement),
            "physician_agreement": records(check.physician_agreement),
            "corrected": {"runs": records(check.corrected), "differences": records(check.differences)},
            "rates": records(check.rates), "judge_errors": records(check.judge_errors), "plan": records(check.plan)}


@click.command("calibrate")
@run_options
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True,
              help="Items in the list of the judge's most frequent errors.")
@section_option(SECTIONS)
@judge_options(judge_help="Check and correct this judge (default: each run's primary judge).",
               pass_help="Judge pass(es) scored (default: all); the first is the one set against the labels.")
@resample_options(samples_help="Case resamples of the physicians' own kappa interval [default: 10000].",
                  seed_help="Seed of the physicians' kappa resamples [default: 42].")
@format_option
@store_option
def calibrate_cmd(runs: RunChoice, top: int, section: str | None, selection, samples: int, seed: int, fmt: str,
                  store_dir: str | None) -> None:
    """The judge against physician labels: accuracy per item class, and scores corrected by the labels."""
    from toolkit.analysis.paired import ResampleSettings
    from toolkit.analysis.physicians import PhysicianOptions, judge_vs_physicians
    from toolkit.labels import read_labels
    from toolkit.selection import read_runs

    store = open_store(store_dir)
    ids = selected_runs(store, runs)
    labels = read_labels(store, ids)
    have = set(labels["run_id"].to_list())
    missing = [r for r in ids if r not in have]
    if missing and (not runs.every or len(missing) == len(ids)):
        raise CommandError([f"calibrate: run {missing[0]!r} has no physician labels (make them with `bedside review` "
                            "and `bedside labels import`)"])
    chosen = [r for r in ids if r in have]
    options = PhysicianOptions(resamples=ResampleSettings(samples=samples, seed=seed), top=top, selection=selection)
    check = judge_vs_physicians(read_runs(store, chosen, texts=False), labels, options)
    notes = check.notes + [f"run {r} has no physician labels and is left out" for r in missing]
    if fmt == "json" and section is None:
        from toolkit.inputs import dumps

        echo_json(dumps(_json(check) | {"notes": notes}, indent=2, default=str))
        return
    if fmt == "table":
        views = _views(check, section)
        for name in SECTIONS:
            if section in (None, name):
                for title, shown in views[name]:
                    if shown.height:
                        emit(shown, "table", title=title)
        sys.stdout.flush()  # the tables before the notes when both streams go to one terminal
        for note in notes:
            note_line(note)
        return
    emit_sections(check.sections(), fmt, section, notes)
