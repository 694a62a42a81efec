"""``bedside variance``: the variance budget of runs (``toolkit.analysis.variance``) as tables or JSON."""

from __future__ import annotations

import click

from toolkit.cli.analysis import emit_sections, section_option
from toolkit.cli.common import CommandError, open_store, selected_runs
from toolkit.cli.options import (RunChoice, check_paired_samples, format_option, judge_options, resample_options,
                                 run_options, store_option)
from toolkit.selection import JudgeSelection

SECTIONS = ("design", "components", "shares", "intervals", "worst_at_k", "pass_k")


def _threshold(value: float, name: str) -> float:
    if not 0.0 <= value <= 1.0:
        raise CommandError([f"variance: {name} must be between 0 and 1 (got {value:g})"])
    return value


@click.command("variance")
@run_options
@click.option("--pass-threshold", "points_threshold", type=float, default=1.0, show_default=True,
              help="pass^k: an answer to a points benchmark passes at this score or above.")
@click.option("--f1-threshold", type=float, default=1.0, show_default=True,
              help="pass^k: an answer to an F1 benchmark passes at this weighted F1 or above.")
@section_option(SECTIONS)
@judge_options()
@resample_options()
@format_option
@store_option
def variance_cmd(runs: RunChoice, points_threshold: float, f1_threshold: float, section: str | None,
                 selection: JudgeSelection, samples: int, seed: int, fmt: str, store_dir: str | None) -> None:
    """Variance budget: case, answer and judge variance of a case score with intervals, their shares of the run
    mean's variance, the run's intervals, worst-at-k and pass^k."""
    from toolkit.analysis.paired import ResampleSettings
    from toolkit.analysis.variance import OVERALL, VarianceOptions, variance_components

    check_paired_samples(samples, "variance")
    options = VarianceOptions(resamples=ResampleSettings(samples=samples, seed=seed), selection=selection,
                              points_threshold=_threshold(points_threshold, "--pass-threshold"),
                              f1_threshold=_threshold(f1_threshold, "--f1-threshold"))
    store = open_store(store_dir)
    budget = variance_components(store, selected_runs(store, runs), options)
    notes = budget.notes + [selection.describe(),
                            f"{samples} case resamples (seed {seed}); components: bootstrap-t, means: BCa"]
    passes = budget.design.filter(budget.design["benchmark"] == OVERALL).select("run_id", "passes_per_answer")
    if passes.height:
        shown = ", ".join(f"{j} ({run})" for run, j in passes.iter_rows())
        notes.append(f"worst_at_k and pass_k score each answer by the mean of its J judge passes (J = {shown}): "
                     "they depend on J (more passes average out judge noise), so report J with them")
    sections = budget.sections()
    views = {}
    if fmt == "table" and section is None:  # every benchmark's rows: --section NAME
        for name in ("design", "components", "shares", "worst_at_k", "pass_k"):
            frame = sections[name]
            views[name] = [(f"{name} (overall; --section {name}: each benchmark)",
                            frame.filter(frame["benchmark"] == OVERALL).drop("benchmark"))]
    emit_sections(sections, fmt, section, notes, views=views)
