"""``bedside report``: the comparison report of some runs as one HTML file, Markdown, figures and CSV tables."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from toolkit.cli.common import CommandError, open_store, selected_runs
from toolkit.cli.options import (RunChoice, allow_mixed_option, check_paired_samples, dataset_option, judge_options,
                                 prices_option, resample_options, run_options, store_option)

if TYPE_CHECKING:
    from toolkit.selection import JudgeSelection


@click.command("report")
@run_options
@click.option("--baseline", default=None, help="Compare every other run against this run.")
@click.option("--title", default=None, help="Report title (default: 'Comparison of N runs').")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Output directory (default: reports/<name>/ under the current directory).")
@allow_mixed_option
@judge_options()
@resample_options(samples_help="Bootstrap resamples (default: the protocol's 10000).",
                  seed_help="Bootstrap seed (default: the protocol's 42).")
@click.option("--no-figures", is_flag=True, help="Tables and text only (faster; no figures/ folder content).")
@click.option("--timings", is_flag=True, help="Print the seconds spent reading, analysing, drawing and writing.")
@dataset_option
@store_option
@prices_option
def report_cmd(runs: RunChoice, baseline: str | None, title: str | None, out_dir: str | None, allow_mixed: bool,
               selection: JudgeSelection, samples: int, seed: int, no_figures: bool, timings: bool,
               dataset_path: str | None, store_dir: str | None, prices_file: str | None) -> None:
    """Write a comparison report: index.html (one self-contained file), report.md, figures/, tables/."""
    from toolkit.report import ReportOptions, write_report

    check_paired_samples(samples, "report")
    store = open_store(store_dir)
    try:
        chosen = selected_runs(store, runs)
    except click.UsageError as error:  # one line, like every other bad input
        raise CommandError([f"report: {error.message}"]) from None
    if baseline is not None and baseline not in chosen:
        raise CommandError([f"report: --baseline {baseline!r} is not one of the selected runs"])
    options = ReportOptions(baseline=baseline, title=title, samples=samples, seed=seed, selection=selection,
                            allow_mixed=allow_mixed, dataset=dataset_path, figures=not no_figures, prices=prices_file)
    paths = write_report(store, None if runs.every else chosen, out_dir, options)
    if timings:
        for name, seconds in paths.timings.items():
            click.echo(f"{name:<10} {seconds:6.2f} s")
        click.echo(f"{'total':<10} {sum(paths.timings.values()):6.2f} s")
    click.echo(f"report: {paths.html}")
    click.echo(f"        {paths.markdown} ({len(paths.figures)} figures, {len(paths.tables)} tables)")
