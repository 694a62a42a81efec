"""``bedside report``: the comparison report of some runs as one HTML file, Markdown, figures and CSV tables."""

from __future__ import annotations

import click

from toolkit.cli.common import CommandError, dataset_option, open_store, selected_runs, store_option


@click.command("report")
@click.option("--run", "runs", multiple=True, help="Run id (repeatable).")
@click.option("--all", "all_runs", is_flag=True, help="Every run in the store.")
@click.option("--baseline", default=None, help="Compare every other run against this run.")
@click.option("--title", default=None, help="Report title (default: 'Comparison of N runs').")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Output directory (default: reports/<name>/ under the current directory).")
@click.option("--allow-mixed", is_flag=True, help="Compare runs graded on different datasets or by different judges.")
@click.option("--judge", default=None, help="Score with this judge model (default: each run's judge).")
@click.option("--pass", "passes", type=int, multiple=True, help="Judge pass(es) to use (default: all).")
@click.option("--samples", type=int, default=None, help="Bootstrap resamples (default: the protocol's 10000).")
@click.option("--seed", type=int, default=None, help="Bootstrap seed (default: the protocol's 42).")
@click.option("--no-figures", is_flag=True, help="Tables and text only (faster; no figures/ folder content).")
@click.option("--timings", is_flag=True, help="Print the seconds spent reading, analysing, drawing and writing.")
@dataset_option
@store_option
def report_cmd(runs: tuple[str, ...], all_runs: bool, baseline: str | None, title: str | None, out_dir: str | None,
               allow_mixed: bool, judge: str | None, passes: tuple[int, ...], samples: int | None, seed: int | None,
               no_figures: bool, timings: bool, dataset_path: str | None, store_dir: str | None) -> None:
    """Write a comparison report: index.html (one self-contained file), report.md, figures/, tables/."""
    from toolkit.protocol import BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED
    from toolkit.report import ReportOptions, write_report
    from toolkit.selection import JudgeSelection

    samples = BOOTSTRAP_SAMPLES if samples is None else samples
    seed = BOOTSTRAP_SEED if seed is None else seed
    if samples < 100:
        raise CommandError([f"report: --samples must be >= 100 for paired intervals and p-values (got {samples})"])
    if seed < 0:
        raise CommandError([f"report: --seed must be >= 0 (got {seed})"])
    store = open_store(store_dir)
    try:
        chosen = selected_runs(store, runs, all_runs)
    except click.UsageError as error:  # one line, like every other bad input
        raise CommandError([f"report: {error.message}"]) from None
    if baseline is not None and baseline not in chosen:
        raise CommandError([f"report: --baseline {baseline!r} is not one of the selected runs"])
    options = ReportOptions(baseline, title, samples, seed, JudgeSelection(judge, tuple(passes) or None), allow_mixed,
                            dataset_path, not no_figures)
    paths = write_report(store, None if all_runs else chosen, out_dir, options)
    if timings:
        for name, seconds in paths.timings.items():
            click.echo(f"{name:<10} {seconds:6.2f} s")
        click.echo(f"{'total':<10} {sum(paths.timings.values()):6.2f} s")
    click.echo(f"report: {paths.html}")
    click.echo(f"        {paths.markdown} ({len(paths.figures)} figures, {len(paths.tables)} tables)")
