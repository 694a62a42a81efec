"""``bedside run | judge | demo``: collect answers and judgments from OpenAI-compatible endpoints."""

from __future__ import annotations

import json

import click

from typing import TYPE_CHECKING, Any

from toolkit import protocol
from toolkit.cli.common import CommandError, dataset_option, emit, open_store, store_option
from toolkit.collect.judge import case_to_judge
from toolkit.collect.plan import cases_from_store, ensure_run, make_plan, read_stored_work, record_judge
from toolkit.collect.settings import (CollectSettings, Endpoint, RetryPolicy, load_providers, resolve_endpoint,
                                      resolve_judge_endpoint)
from toolkit.dataset import load_dataset
from toolkit.store import Store

if TYPE_CHECKING:  # the collector pulls in the openai SDK (~1 s): imported only by the commands that call
    from toolkit.collect.runner import CollectJob, RunReport

EXIT_INCOMPLETE = 3  # the run finished but some cases failed: re-running retries them
EXIT_INTERRUPTED = 130


def call_options(func):
    """Options shared by ``run`` and ``judge``."""
    for option in reversed([
        click.option("--judge-base-url", default=None, help="Judge endpoint (default: by the provider table)."),
        click.option("--judge-api-key-env", default=None, metavar="NAME",
                     help="Environment variable holding the judge's key."),
        click.option("--concurrency", type=click.IntRange(1, 1000), default=16, show_default=True,
                     help="Most calls in flight (lowered automatically while the provider rate-limits)."),
        click.option("--judge-passes", type=click.IntRange(1, 100), default=None,
                     help="Independent judge passes 1..K per answer [default: 1]."),
        click.option("--max-retries", type=click.IntRange(1, 100), default=protocol.REFERENCE_MAX_ATTEMPTS,
                     show_default=True, help="Attempts per call, the first included (retryable faults only)."),
        click.option("--judge-reasks", type=click.IntRange(0, 20), default=2, show_default=True,
                     help="Extra judge calls after an invalid reply before the case is a judge error."),
        click.option("--timeout", type=click.FloatRange(0.1, None), default=600.0, show_default=True,
                     help="Seconds before a call is abandoned and retried."),
        click.option("--retry-base-delay", type=click.FloatRange(0.0, 60.0), default=1.0, show_default=True,
                     help="Back-off before the first retry; doubles per attempt (random jitter, at most 60 s)."),
        click.option("--dry-run", is_flag=True, help="Print the calls, tokens and cost it would take; call nothing."),
        click.option("--batch", is_flag=True, help="Use the provider's Batch API (slower, usually half price)."),
        click.option("--progress", type=click.Choice(["auto", "rich", "plain", "none"]), default="auto",
                     show_default=True, help="Progress display (auto: a bar on a terminal, lines otherwise)."),
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
@click.option("--limit", type=click.IntRange(1, None), default=None, help="Only the first N selected cases.")
@click.option("--benchmark", "benchmarks", multiple=True, help="Only these benchmarks (repeatable).")
@call_options
@dataset_option
def run_cmd(answer_model: str, judge_model: str, run_id: str | None, base_url: str | None, api_key_env: str | None,
            reasoning_effort: str | None, smoke: bool, limit: int | None, benchmarks: tuple[str, ...],
            judge_base_url: str | None, judge_api_key_env: str | None, concurrency: int, judge_passes: int | None,
            max_retries: int, judge_reasks: int, timeout: float, retry_base_delay: float, dry_run: bool, batch: bool,
            progress: str, store_dir: str | None, dataset_path: str | None) -> None:
    """Answer every selected case with a model and judge the answers; resumes where it stopped.

    Exit status: 0 complete, 3 finished with failed cases (run it again to retry them), 130 interrupted.
    """
    table = load_providers()
    dataset = load_dataset(dataset_path)
    case_ids = dataset.select(smoke, limit, benchmarks)
    answer_endpoint = resolve_endpoint(table, answer_model, base_url, api_key_env)
    judge_endpoint = resolve_judge_endpoint(table, answer_model, answer_endpoint, judge_model, judge_base_url,
                                            judge_api_key_env)
    settings = CollectSettings(
        run_id or answer_model, answer_model, judge_model, answer_endpoint, judge_endpoint, concurrency,
        tuple(range(1, (judge_passes or 1) + 1)), reasoning_effort, judge_reasks,
        RetryPolicy(max_retries, retry_base_delay, timeout_s=timeout), batch=batch,
        selection={"smoke": smoke, "limit": limit, "benchmarks": list(benchmarks), "cases": len(case_ids)})
    from toolkit.collect.runner import CollectJob

    job = CollectJob(settings, tuple(case_to_judge(dataset.case(c)) for c in case_ids))
    store = open_store(store_dir)
    if dry_run:
        _dry_run(store, job, table, batch)
        return

    def prepare(store: Store, job: CollectJob) -> None:
        store.write_dataset(dataset)
        run = ensure_run(store, job.settings, dataset.sha256)
        record_judge(store, run, judge_model, judge_endpoint.describe())

    _finish(_collect(store, job, prepare, batch, progress))


@click.command("judge")
@click.option("--run", "run_id", required=True, help="Run whose stored answers are judged.")
@click.option("--judge-model", required=True, help="Judge model (another judge, or the same one again).")
@click.option("--pass", "passes", type=click.IntRange(1, 100), multiple=True,
              help="Judge pass number(s) to collect, e.g. --pass 2 for a second pass (repeatable).")
@call_options
def judge_cmd(run_id: str, judge_model: str, passes: tuple[int, ...], judge_base_url: str | None,
              judge_api_key_env: str | None, concurrency: int, judge_passes: int | None, max_retries: int,
              judge_reasks: int, timeout: float, retry_base_delay: float, dry_run: bool, batch: bool, progress: str,
              store_dir: str | None) -> None:
    """Judge a run's stored answers again or with another judge, without regenerating them.

    Passes already judged validly are skipped. Exit status as for ``bedside run``.
    """
    if passes and judge_passes:
        raise click.UsageError("give --pass or --judge-passes, not both")
    store = open_store(store_dir)
    run = store.run(run_id)
    table = load_providers()
    stored = (json.loads(run["settings"] or "{}") or {}).get("answer_endpoint")
    answer_endpoint = Endpoint(stored["provider"], stored["base_url"], tuple(stored["api_key_env"])) if stored else None
    judge_endpoint = resolve_judge_endpoint(table, run["answer_model"] or "", answer_endpoint, judge_model,
                                            judge_base_url, judge_api_key_env)
    settings = CollectSettings(
        run_id, run["answer_model"] or "", judge_model, None, judge_endpoint, concurrency,
        tuple(sorted(set(passes))) or tuple(range(1, (judge_passes or 1) + 1)), run["answer_reasoning_effort"],
        judge_reasks, RetryPolicy(max_retries, retry_base_delay, timeout_s=timeout), batch=batch)
    from toolkit.collect.runner import CollectJob

    job = CollectJob(settings, tuple(cases_from_store(store, run["dataset_sha256"])), answer=False)
    if dry_run:
        _dry_run(store, job, table, batch)
        return

    def prepare(store: Store, job: CollectJob) -> None:
        record_judge(store, store.run(run_id), judge_model, judge_endpoint.describe())

    _finish(_collect(store, job, prepare, batch, progress))


@click.command("demo")
@store_option
@click.option("--concurrency", type=click.IntRange(1, 1000), default=16, show_default=True,
              help="Calls in flight per simulated model.")
@click.option("--progress", type=click.Choice(["auto", "rich", "plain", "none"]), default="auto", show_default=True)
def demo_cmd(store_dir: str | None, concurrency: int, progress: str) -> None:
    """Offline demo: four simulated models on the bundled sample, graded by a simulated judge.

    Starts the simulated provider on loopback, collects into a FRESH store (default data/results/demo,
    wiped first) and prints the leaderboard.
    """
    from toolkit.collect.demo import run_demo
    from toolkit.collect.progress import view_factory

    store, reports, board = run_demo(store_dir, concurrency, view_factory(progress))
    for report in reports:
        click.echo(report.line())
    emit(board, "table", title="Leaderboard: simulated models on the bundled sample (macro mean, 95% CI)")
    click.echo(f"store: {store.root}  (explore: bedside summary --all --store {store.root})")
    click.echo("Simulated models, illustrative sample: these numbers say nothing about any real model. "
               "Not for clinical use.")


def _dry_run(store: Store, job: CollectJob, table: Any, batch: bool) -> None:
    # Reads only: no lock, no journal recovery, nothing created.
    from toolkit.collect.estimate import estimate, render

    work = read_stored_work(store, job.settings.run_id)
    plan = make_plan(list(job.cases), work, job.settings.judge_model, job.settings.judge_passes, job.answer)
    for line in render(estimate(plan, work, job.settings, table, batch), plan, job.settings, batch):
        click.echo(line)


def _collect(store: Store, job: CollectJob, prepare: Any, batch: bool, progress: str) -> RunReport:
    from toolkit.collect.batch import BatchFailed, collect_batch
    from toolkit.collect.client import EndpointFatal
    from toolkit.collect.progress import view_factory
    from toolkit.collect.runner import collect

    try:
        if batch:
            return collect_batch(store, job, click.echo, prepare)
        return collect(store, [job], view_factory(progress), prepare=prepare)[0]
    except (EndpointFatal, BatchFailed) as error:
        raise CommandError([f"{error} (nothing else was called; completed work is stored)"]) from None


def _finish(report: RunReport) -> None:
    click.echo(report.line())
    if report.interrupted:
        raise _exit(EXIT_INTERRUPTED, "interrupted; what completed is stored. Run the same command again to resume.")
    if report.answer_errors or report.judge_errors:
        raise _exit(EXIT_INCOMPLETE, f"{report.answer_errors + report.judge_errors} cases still failed; run the "
                    "same command again to retry them (the errors are in the answers and judgments tables)")


def _exit(code: int, message: str) -> CommandError:
    error = CommandError([message])
    error.exit_code = code
    return error
