"""``bedside run | judge | demo``: collect answers and judgments from OpenAI-compatible endpoints.

Options in, a call to ``toolkit.collect.api`` (or ``run_demo``), output and exit status out: the
logic lives in the API so that notebooks can call it. The API is imported inside the commands
because the collector pulls in the openai SDK, heavy to import, which other commands never need.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import click

from toolkit import protocol
from toolkit.cli.common import CommandError, emit, say
from toolkit.cli.options import dataset_option, prices_option, store_option, wide_option
from toolkit.collect.settings import (DEFAULT_ANSWER_SAMPLES, DEFAULT_CONCURRENCY, DEFAULT_JUDGE_PASSES,
                                      DEFAULT_JUDGE_REASKS,
                                      DEFAULT_MAX_REPLY_BYTES, DEFAULT_PROGRESS, DEFAULT_RETRY_BASE_DELAY,
                                      DEFAULT_TIMEOUT_S, FLOAT_RANGES,
                                      INT_RANGES, PROGRESS_MODES)

if TYPE_CHECKING:
    from toolkit.collect.api import Collection
    from toolkit.collect.runner import RunReport
    from toolkit.store import Store

EXIT_INCOMPLETE = 3  # the run finished but some cases failed: re-running retries them
EXIT_INTERRUPTED = 130


progress_option = click.option("--progress", type=click.Choice(PROGRESS_MODES), default=DEFAULT_PROGRESS,
                               show_default=True, help="Progress display (auto: a bar on a terminal, lines otherwise).")


def call_options(func):
    """Options shared by ``run`` and ``judge``."""
    for option in reversed([
        click.option("--judge-base-url", default=None, help="Judge endpoint (default: by the provider table)."),
        click.option("--judge-api-key-env", default=None, metavar="NAME",
                     help="Environment variable holding the judge's key."),
        click.option("--concurrency", type=click.IntRange(*INT_RANGES["concurrency"]), default=DEFAULT_CONCURRENCY,
                     show_default=True,
                     help="Most calls in flight (lowered automatically while the provider rate-limits)."),
        click.option("--judge-passes", type=click.IntRange(*INT_RANGES["judge_passes"]), default=None,
                     help=f"Independent judge passes 1..K per answer [default: {DEFAULT_JUDGE_PASSES}]."),
        click.option("--max-retries", type=click.IntRange(*INT_RANGES["max_retries"]),
                     default=protocol.REFERENCE_MAX_ATTEMPTS, show_default=True,
                     help="Attempts per call, the first included (retryable faults only)."),
        click.option("--judge-reasks", type=click.IntRange(*INT_RANGES["judge_reasks"]), default=DEFAULT_JUDGE_REASKS,
                     show_default=True,
                     help="Extra judge calls after an invalid reply before the case is a judge error."),
        click.option("--timeout", type=click.FloatRange(*FLOAT_RANGES["timeout"]), default=DEFAULT_TIMEOUT_S,
                     show_default=True, help="Seconds before a call is abandoned and retried."),
        click.option("--retry-base-delay", type=click.FloatRange(*FLOAT_RANGES["retry_base_delay"]),
                     default=DEFAULT_RETRY_BASE_DELAY, show_default=True,
                     help="Back-off before the first retry; doubles per attempt (random jitter, at most 60 s)."),
        click.option("--max-reply-bytes", type=click.IntRange(*INT_RANGES["max_reply_bytes"]),
                     default=DEFAULT_MAX_REPLY_BYTES, show_default=True,
                     help="A bigger reply is a failed call (ReplyTooLarge), neither stored nor kept."),
        click.option("--dry-run", is_flag=True, help="Print the calls, tokens and cost it would take; call nothing."),
        prices_option,  # for --dry-run's dollars
        click.option("--batch", is_flag=True, help="Use the provider's Batch API (slower, usually half price)."),
        click.option("--cancel-batch", is_flag=True,
                     help="Cancel the run's batch in flight, store the lines it finished, and stop."),
        progress_option,
        store_option,
    ]):
        func = option(func)
    return func


@click.command("run")
@click.option("--answer-model", required=True, help="Model under evaluation, as the endpoint names it.")
@click.option("--judge-model", default=protocol.DEFAULT_JUDGE_MODEL, show_default=True, help="Judge model.")
@click.option("--run-id", default=None, help="Run id (default: the answer model name).")
@click.option("--base-url", default=None, help="Answer endpoint, any OpenAI-compatible URL (default: by the "
              "provider table; OpenAI otherwise).")
@click.option("--api-key-env", default=None, metavar="NAME", help="Environment variable holding the answer key "
              "(default: OPENAI_API_KEY or OPENAI_ACCESS_TOKEN for OpenAI).")
@click.option("--reasoning-effort", default=None, help="reasoning_effort sent with answer calls (only if given).")
@click.option("--smoke", is_flag=True, help="Only the first case of each benchmark.")
@click.option("--limit", type=click.IntRange(*INT_RANGES["limit"]), default=None,
              help="Only the first N selected cases.")
@click.option("--benchmark", "benchmarks", multiple=True, help="Only these benchmarks (repeatable).")
@click.option("--answer-samples", type=click.IntRange(*INT_RANGES["answer_samples"]), default=DEFAULT_ANSWER_SAMPLES,
              show_default=True, help="Independent answers per case, each judged (a stored run gains the ones "
              "it lacks). Not --samples, the bootstrap resamples of other commands.")
@call_options
@dataset_option
def run_cmd(answer_model: str, judge_model: str, run_id: str | None, base_url: str | None, api_key_env: str | None,
            reasoning_effort: str | None, smoke: bool, limit: int | None, benchmarks: tuple[str, ...],
            answer_samples: int, judge_base_url: str | None, judge_api_key_env: str | None, concurrency: int,
            judge_passes: int | None,
            max_retries: int, judge_reasks: int, timeout: float, retry_base_delay: float, max_reply_bytes: int,
            dry_run: bool, prices_file: str | None, batch: bool, cancel_batch: bool, progress: str,
            store_dir: str | None, dataset_path: str | None) -> None:
    """Answer every selected case with a model and judge the answers; resumes where it stopped.

    Exit status: 0 complete, 3 finished with failed cases (run it again to retry them), 130 interrupted.
    """
    from toolkit.collect.api import plan_evaluation

    collection = plan_evaluation(
        answer_model, judge_model, store=store_dir, dataset=dataset_path, run_id=run_id, base_url=base_url,
        api_key_env=api_key_env, judge_base_url=judge_base_url, judge_api_key_env=judge_api_key_env,
        concurrency=concurrency, judge_passes=judge_passes or DEFAULT_JUDGE_PASSES, reasoning_effort=reasoning_effort,
        smoke=smoke, limit=limit, benchmarks=benchmarks, max_retries=max_retries, judge_reasks=judge_reasks,
        timeout=timeout, retry_base_delay=retry_base_delay, batch=batch, max_reply_bytes=max_reply_bytes,
        answer_samples=answer_samples)
    _collect_or_estimate([collection], dry_run, cancel_batch, progress, prices_file)


@click.command("judge")
@click.option("--run", "run_ids", multiple=True, required=True,
              help="Run whose stored answers are judged (repeatable: each run in turn).")
@click.option("--judge-model", required=True, help="Judge model (another judge, or the same one again).")
@click.option("--pass", "passes", type=click.IntRange(*INT_RANGES["judge_passes"]), multiple=True,
              help="Judge pass number(s) to collect, e.g. --pass 2 for a second pass (repeatable).")
@call_options
def judge_cmd(run_ids: tuple[str, ...], judge_model: str, passes: tuple[int, ...], judge_base_url: str | None,
              judge_api_key_env: str | None, concurrency: int, judge_passes: int | None, max_retries: int,
              judge_reasks: int, timeout: float, retry_base_delay: float, max_reply_bytes: int, dry_run: bool,
              prices_file: str | None, batch: bool, cancel_batch: bool, progress: str, store_dir: str | None) -> None:
    """Judge a run's stored answers again or with another judge, without regenerating them.

    Passes already judged validly are skipped. Exit status as for ``bedside run``.
    """
    if passes and judge_passes:
        raise click.UsageError("give --pass or --judge-passes, not both")
    from toolkit.collect.api import plan_rejudge

    # every run planned before any is judged: an unknown id stops the command with nothing called
    collections = [plan_rejudge(
        run_id, judge_model, store=store_dir, passes=passes, judge_passes=judge_passes, judge_base_url=judge_base_url,
        judge_api_key_env=judge_api_key_env, concurrency=concurrency, max_retries=max_retries,
        judge_reasks=judge_reasks, timeout=timeout, retry_base_delay=retry_base_delay, batch=batch,
        max_reply_bytes=max_reply_bytes) for run_id in dict.fromkeys(run_ids)]
    _collect_or_estimate(collections, dry_run, cancel_batch, progress, prices_file)


@click.command("demo")
@store_option
@click.option("--concurrency", type=click.IntRange(*INT_RANGES["concurrency"]), default=DEFAULT_CONCURRENCY,
              show_default=True, help="Calls in flight at the simulated endpoint, shared by the four models.")
@progress_option
@click.option("--replace", is_flag=True, help="Replace runs named like the demo's (sim/strong, ...) even when the "
              "demo did not collect them (it replaces its own earlier runs anyway).")
@wide_option
def demo_cmd(store_dir: str | None, concurrency: int, progress: str, replace: bool) -> None:
    """Offline demo: four simulated models on the bundled sample, graded by a simulated judge.

    Starts the simulated provider on loopback, collects the runs sim/strong, sim/medium, sim/weak and
    sim/skill-0.45 into the store and prints their leaderboard. It replaces only the runs an earlier demo
    collected; every other run in the store stays as it was.
    """
    import shlex

    from toolkit.collect.api import progress_views
    from toolkit.collect.demo import report_lines, run_demo

    store, reports, board = run_demo(store_dir, concurrency, progress_views(progress), replace=replace,
                                     say=say)
    for line in report_lines(reports):
        say(line)
    if board is None:  # interrupted: no leaderboard of partly collected runs
        raise _exit(EXIT_INTERRUPTED, f"interrupted; {store.root} holds partial runs. Run `bedside demo` again "
                    "to start over.")
    emit(board, "table",
         title="Leaderboard: simulated models on the bundled sample (macro mean, 95% percentile bootstrap)",
         optional=("answer_model", "judge_model"))
    # the report written below shows compare's intervals
    from toolkit.cli.results import INTERVALS_NOTE, say_small_sizes

    click.echo(INTERVALS_NOTE, err=True)
    sizes = store.read("case_scores", board["run"].to_list()).group_by("run_id", "benchmark").len()["len"]
    say_small_sizes(sizes.min() if sizes.len() else None)
    named = store_dir is not None or "BEDSIDE_STORE" in os.environ
    where = f" --store {shlex.quote(str(store.root))}" if named else ""
    say(f"store: {store.root}")
    from pathlib import Path

    from toolkit.collect.demo import DEMO_MODELS
    from toolkit.report import ReportOptions, write_report  # the demo's report: reports/demo, or beside --store

    if store.is_remote:  # a report is a local folder: one named for the store, beside the local demo's
        from toolkit.report.model import slug

        out = Path("reports", f"demo-{slug(str(store.root))}")
    else:
        out = Path(store.root).parent / f"{Path(store.root).name}-report" if where else Path("reports", "demo")
    report = write_report(store, list(DEMO_MODELS), out,
                          ReportOptions(title="Demo: simulated models on the bundled sample"))
    say(f"report: {report.html}   (open in a browser; report.md, figures/ and tables/ beside it)")
    say(f"next:  bedside compare --all{where}   (paired comparisons, ranks)")
    say(f"       bedside items --all{where}     (rubric items behind the scores)")
    say("Simulated models, illustrative sample: these numbers say nothing about any real model. "
               "Not for clinical use.")


def _collect_or_estimate(collections: list[Collection], dry_run: bool, cancel_batch: bool, progress: str,
                         prices_file: str | None = None) -> None:
    """Collect each collection in turn (an interrupt or a fatal endpoint stops them all); the runs left with
    failed cases are named together at the end."""
    from toolkit.collect.batch import BatchFailed
    from toolkit.collect.batch_state import PendingBatch
    from toolkit.collect.client import EndpointFatal
    from toolkit.collect.reach import EndpointUnreachable

    if dry_run and cancel_batch:
        raise click.UsageError("give --dry-run or --cancel-batch, not both")
    if dry_run:
        for collection in collections:
            for line in collection.dry_run(prices_file).lines():
                say(line)
        return
    incomplete: list[str] = []
    for collection in collections:
        try:
            if cancel_batch:
                report = collection.cancel_batch(say=say)
            else:  # batch messages are printed whatever --progress says
                report = collection.run(progress, say=say)
        except EndpointUnreachable as error:  # found before anything was called or written
            raise CommandError([str(error)]) from None
        except (EndpointFatal, BatchFailed) as error:
            raise CommandError([f"{error} (nothing else was called; completed work is stored)"]) from None
        except PendingBatch as error:
            raise CommandError([str(error)]) from None
        why = _finish(report, collection.store)
        if why is not None:
            incomplete.append(f"{why}; run the same command again to retry them")
    if incomplete:
        error = CommandError(incomplete)
        error.exit_code = EXIT_INCOMPLETE
        raise error


def _finish(report: RunReport, store: Store) -> str | None:
    """Prints the run's line; stops on an interrupt; says why cases failed, if any did."""
    say(report.line())
    if report.interrupted:
        raise _exit(EXIT_INTERRUPTED, "interrupted; what completed is stored. Run the same command again to resume.")
    if report.answer_errors or report.judge_errors:
        from toolkit.failures import causes_line, failure_causes

        # batch mode keeps no per-call errors in its report: the stored errors say why
        why = report.failure_line()
        if why is None:
            causes = failure_causes(store, report.run_id)
            why = f"{report.run_id}: " + (causes_line(causes) if causes else
                                          f"{report.answer_errors + report.judge_errors} cases still failed")
        return why
    return None


def _exit(code: int, message: str) -> CommandError:
    error = CommandError([message])
    error.exit_code = code
    return error
