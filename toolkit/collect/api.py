"""Collection as a Python API: what ``bedside run`` and ``bedside judge`` do, callable from a notebook.

``evaluate`` has a model answer a dataset's cases and a judge grade the answers,
resuming a stopped run; ``rejudge`` grades a run's stored answers again (another
judge, or further passes) without regenerating them. ``plan_evaluation`` and
``plan_rejudge`` build the same work without calling anything:
``Collection.dry_run()`` tells which calls it would make and roughly what they
cost, ``Collection.run()`` makes them. The CLI is a thin layer over these.

Defaults and accepted ranges come from ``toolkit.collect.settings`` (the CLI's
flags use the same ones). Keys are read from environment variables when the
calls start; nothing here holds or stores a key, only variable names.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from toolkit import protocol
from toolkit.collect.batch import collect_batch
from toolkit.collect.estimate import CallEstimate, estimate, render
from toolkit.collect.judge import case_to_judge
from toolkit.collect.plan import Plan, cases_from_store, ensure_run, make_plan, read_stored_work, record_judge
from toolkit.collect.progress import ViewFactory, view_factory
from toolkit.collect.runner import CollectJob, RunReport, collect
from toolkit.collect.settings import (DEFAULT_ANSWER_SAMPLES, DEFAULT_CONCURRENCY, DEFAULT_JUDGE_PASSES,
                                      DEFAULT_JUDGE_REASKS,
                                      DEFAULT_MAX_REPLY_BYTES, DEFAULT_PROGRESS, DEFAULT_RETRY_BASE_DELAY,
                                      DEFAULT_TIMEOUT_S, FLOAT_RANGES,
                                      INT_RANGES, PROGRESS_MODES, CollectSettings, Endpoint, ProviderTable,
                                      RetryPolicy, check_env_name, load_providers, resolve_endpoint,
                                      resolve_judge_endpoint)
from toolkit.dataset import Dataset, load_dataset
from toolkit.prices import PriceTable, load_prices
from toolkit.store import Store

StoreLike = Store | str | os.PathLike[str] | None  # None: $BEDSIDE_STORE, else ./data/results
DatasetLike = Dataset | str | os.PathLike[str] | None  # None: the bundled sample
ProvidersLike = ProviderTable | str | os.PathLike[str] | None  # None: $BEDSIDE_PROVIDERS, else the bundled table
PricesLike = PriceTable | str | os.PathLike[str] | None  # None: $BEDSIDE_PRICES, else the built-in table
Progress = str | ViewFactory  # one of PROGRESS_MODES, or a factory of progress views
Say = Callable[[str], None]
Prepare = Callable[[Store, CollectJob], None]


@dataclass(frozen=True)
class DryRun:
    """What a collection would call, estimated without calling or writing anything."""

    estimates: tuple[CallEstimate, ...]  # one per kind of call still due (answer, judge)
    plan: Plan
    settings: CollectSettings
    batch: bool
    prices: PriceTable | None = None  # the table the dollars came from

    @property
    def calls(self) -> int:
        return sum(e.calls for e in self.estimates)

    @property
    def cost_usd(self) -> float | None:
        """Estimated total; None when a model has no price in the price table."""
        costs = [e.cost_usd for e in self.estimates]
        return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)

    def lines(self) -> list[str]:
        """The report ``--dry-run`` prints, one line each."""
        return render(list(self.estimates), self.plan, self.settings, self.batch, self.prices)


@dataclass(frozen=True, eq=False)
class Collection:
    """One run's work, ready to estimate or to collect into ``store``.

    ``prepare`` runs under the run's lock before the first call: it writes the dataset and the
    runs row, or refuses a resume whose answer model or dataset differs.
    """

    store: Store
    job: CollectJob
    table: ProviderTable
    prepare: Prepare

    @property
    def settings(self) -> CollectSettings:
        return self.job.settings

    def dry_run(self, prices: PricesLike = None) -> DryRun:
        """Estimate the calls still due, priced by ``prices`` (a PriceTable or its TOML file; None:
        ``$BEDSIDE_PRICES``, else the built-in table). Reads only: no lock, no journal recovery, nothing
        created (rows a killed collector left in its journal count as stored, as the real run will find them)."""
        s = self.settings
        table = load_prices(prices)
        work = read_stored_work(self.store, s.run_id, journal=True)
        plan = make_plan(list(self.job.cases), work, s.judge_model, s.judge_passes, self.job.answer,
                         s.answer_samples, s.run_id)
        return DryRun(tuple(estimate(plan, work, s, self.table, s.batch, table)), plan, s, s.batch, table)

    def run(self, progress: Progress = DEFAULT_PROGRESS, say: Say | None = None) -> RunReport:
        """Make the calls still due, storing each as it completes; the report counts this call's work.

        ``say`` receives batch-mode messages (default: printed unless ``progress="none"``). Raises
        ``EndpointFatal`` (wrong key, unknown model), ``BatchFailed``, or ``PendingBatch`` when a direct
        run is asked for while the run has a batch in flight (collect it with ``batch=True`` or
        ``cancel_batch()`` it); what completed is stored.
        """
        views = progress_views(progress)
        if self.settings.batch:
            return collect_batch(self.store, self.job, say or _default_say(progress), self.prepare)
        return collect(self.store, [self.job], views, prepare=self.prepare)[0]

    def cancel_batch(self, say: Say | None = None) -> RunReport:
        """Cancel the run's batch in flight at the provider, store the lines it finished, forget it.

        Nothing new is submitted; the report counts the stored lines. Afterwards ``run()`` collects
        the rest, directly or (``batch=True``) in a new batch.
        """
        return collect_batch(self.store, self.job, say or print, self.prepare, cancel=True)


def progress_views(progress: Progress) -> ViewFactory:
    """A progress view factory from a mode name (see PROGRESS_MODES) or a factory given as is."""
    if isinstance(progress, str):
        if progress not in PROGRESS_MODES:
            raise ValueError(f"progress={progress!r}: choose one of {', '.join(PROGRESS_MODES)} or pass a view factory")
        return view_factory(progress)
    return progress


def plan_evaluation(answer_model: str, judge_model: str = protocol.DEFAULT_JUDGE_MODEL, *,
                    store: StoreLike = None, dataset: DatasetLike = None, run_id: str | None = None,
                    base_url: str | None = None, api_key_env: str | None = None,
                    judge_base_url: str | None = None, judge_api_key_env: str | None = None,
                    concurrency: int = DEFAULT_CONCURRENCY, judge_passes: int = DEFAULT_JUDGE_PASSES,
                    reasoning_effort: str | None = None, smoke: bool = False, limit: int | None = None,
                    benchmarks: str | Sequence[str] = (), max_retries: int = protocol.REFERENCE_MAX_ATTEMPTS,
                    judge_reasks: int = DEFAULT_JUDGE_REASKS, timeout: float = DEFAULT_TIMEOUT_S,
                    retry_base_delay: float = DEFAULT_RETRY_BASE_DELAY, batch: bool = False,
                    providers: ProvidersLike = None, max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
                    answer_samples: int = DEFAULT_ANSWER_SAMPLES) -> Collection:
    """The work of evaluating ``answer_model`` (see ``evaluate`` for the parameters), not yet run."""
    _check_ints(concurrency=concurrency, judge_passes=judge_passes, max_retries=max_retries,
                judge_reasks=judge_reasks, limit=limit, max_reply_bytes=max_reply_bytes, answer_samples=answer_samples)
    _check_floats(timeout=timeout, retry_base_delay=retry_base_delay)
    check_env_name(api_key_env, "--api-key-env")
    check_env_name(judge_api_key_env, "--judge-api-key-env")
    chosen = (benchmarks,) if isinstance(benchmarks, str) else tuple(benchmarks)
    table = _providers(providers)
    data = dataset if isinstance(dataset, Dataset) else load_dataset(dataset)
    case_ids = data.select(smoke, limit, chosen)
    answer_endpoint = resolve_endpoint(table, answer_model, base_url, api_key_env)
    judge_endpoint = resolve_judge_endpoint(table, answer_model, answer_endpoint, judge_model, judge_base_url,
                                            judge_api_key_env)
    settings = CollectSettings(
        run_id=run_id or answer_model, answer_model=answer_model, judge_model=judge_model,
        answer_endpoint=answer_endpoint, judge_endpoint=judge_endpoint, concurrency=concurrency,
        judge_passes=tuple(range(1, judge_passes + 1)), reasoning_effort=reasoning_effort, judge_reasks=judge_reasks,
        retry=RetryPolicy(max_attempts=max_retries, base_delay=retry_base_delay, timeout_s=timeout), batch=batch,
        max_reply_bytes=max_reply_bytes, answer_samples=answer_samples,
        selection={"smoke": smoke, "limit": limit, "benchmarks": list(chosen), "cases": len(case_ids),
                   "dataset": os.path.abspath(data.source)})  # names the digest in reports
    job = CollectJob(settings, tuple(case_to_judge(data.case(c)) for c in case_ids))

    def prepare(target: Store, job: CollectJob) -> None:
        target.write_dataset(data)
        run = ensure_run(target, job.settings, data.sha256)
        record_judge(target, run, judge_model, judge_endpoint.describe())

    return Collection(_store(store), job, table, prepare)


def evaluate(answer_model: str, judge_model: str = protocol.DEFAULT_JUDGE_MODEL, *,
             store: StoreLike = None, dataset: DatasetLike = None, run_id: str | None = None,
             base_url: str | None = None, api_key_env: str | None = None,
             judge_base_url: str | None = None, judge_api_key_env: str | None = None,
             concurrency: int = DEFAULT_CONCURRENCY, judge_passes: int = DEFAULT_JUDGE_PASSES,
             reasoning_effort: str | None = None, smoke: bool = False, limit: int | None = None,
             benchmarks: str | Sequence[str] = (), max_retries: int = protocol.REFERENCE_MAX_ATTEMPTS,
             judge_reasks: int = DEFAULT_JUDGE_REASKS, timeout: float = DEFAULT_TIMEOUT_S,
             retry_base_delay: float = DEFAULT_RETRY_BASE_DELAY, batch: bool = False,
             providers: ProvidersLike = None, progress: Progress = DEFAULT_PROGRESS,
             say: Say | None = None, max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
             answer_samples: int = DEFAULT_ANSWER_SAMPLES) -> RunReport:
    """Answer every selected case with ``answer_model``, judge the answers, store both; resumes.

    Calling it again with the same ``run_id`` (default: the answer model's name) skips completed
    answers and valid judgments and retries only what failed.

    - ``store``: a Store or its directory; ``dataset``: a Dataset or its path (default: the bundled sample).
    - ``base_url`` / ``api_key_env``: any OpenAI-compatible endpoint and the environment variable
      holding its key (default: by the provider table); ``judge_base_url`` / ``judge_api_key_env``
      the same for the judge.
    - ``smoke`` (first case of each benchmark), ``benchmarks``, ``limit``: which cases.
    - ``judge_passes``: independent judge passes 1..K per answer; ``reasoning_effort``: sent with
      answer calls only when given.
    - ``answer_samples``: independent answers 0..K-1 per case (same request each time), each judged
      with every pass; a stored run gains the samples it lacks (asking for fewer than it holds is refused).
    - ``concurrency``: most calls in flight (lowered while the provider rate-limits);
      ``max_retries``: attempts per call, the first included; ``judge_reasks``: extra judge calls
      after an invalid reply; ``timeout`` and ``retry_base_delay`` in seconds; ``max_reply_bytes``: a
      bigger reply is a failed call (ReplyTooLarge), neither stored nor kept.
    - ``batch``: through the provider's Batch API; ``providers``: a provider table or its file.
    - ``progress``: "auto", "rich", "plain", "none" or a view factory; ``say``: batch messages.

    The report says what this call collected; ``answer_errors`` or ``judge_errors`` above zero mean
    calling again would retry them, ``interrupted`` that it was stopped (Ctrl-C) and can resume.
    """
    return plan_evaluation(
        answer_model, judge_model, store=store, dataset=dataset, run_id=run_id, base_url=base_url,
        api_key_env=api_key_env, judge_base_url=judge_base_url, judge_api_key_env=judge_api_key_env,
        concurrency=concurrency, judge_passes=judge_passes, reasoning_effort=reasoning_effort, smoke=smoke,
        limit=limit, benchmarks=benchmarks, max_retries=max_retries, judge_reasks=judge_reasks, timeout=timeout,
        retry_base_delay=retry_base_delay, batch=batch, providers=providers,
        max_reply_bytes=max_reply_bytes, answer_samples=answer_samples).run(progress, say)


def plan_rejudge(run_id: str, judge_model: str, *, store: StoreLike = None, passes: int | Sequence[int] | None = None,
                 judge_passes: int | None = None, judge_base_url: str | None = None,
                 judge_api_key_env: str | None = None, concurrency: int = DEFAULT_CONCURRENCY,
                 max_retries: int = protocol.REFERENCE_MAX_ATTEMPTS, judge_reasks: int = DEFAULT_JUDGE_REASKS,
                 timeout: float = DEFAULT_TIMEOUT_S, retry_base_delay: float = DEFAULT_RETRY_BASE_DELAY,
                 batch: bool = False, providers: ProvidersLike = None,
                 max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES) -> Collection:
    """The work of judging a run's stored answers (see ``rejudge`` for the parameters), not yet run."""
    chosen = (passes,) if isinstance(passes, int) else tuple(passes or ())
    if chosen and judge_passes:
        raise ValueError("give passes or judge_passes, not both")
    for number in chosen:
        _check_ints(judge_passes=number)
    _check_ints(concurrency=concurrency, judge_passes=judge_passes, max_retries=max_retries,
                judge_reasks=judge_reasks, max_reply_bytes=max_reply_bytes)
    _check_floats(timeout=timeout, retry_base_delay=retry_base_delay)
    check_env_name(judge_api_key_env, "--judge-api-key-env")
    target = _store(store)
    run = target.run(run_id)
    table = _providers(providers)
    stored = (json.loads(run["settings"] or "{}") or {}).get("answer_endpoint")
    answer_endpoint = Endpoint(stored["provider"], stored["base_url"], tuple(stored["api_key_env"])) if stored else None
    judge_endpoint = resolve_judge_endpoint(table, run["answer_model"] or "", answer_endpoint, judge_model,
                                            judge_base_url, judge_api_key_env)
    settings = CollectSettings(
        run_id=run_id, answer_model=run["answer_model"] or "", judge_model=judge_model, answer_endpoint=None,
        judge_endpoint=judge_endpoint, concurrency=concurrency,
        judge_passes=tuple(sorted(set(chosen))) or tuple(range(1, (judge_passes or DEFAULT_JUDGE_PASSES) + 1)),
        reasoning_effort=run["answer_reasoning_effort"], judge_reasks=judge_reasks,
        retry=RetryPolicy(max_attempts=max_retries, base_delay=retry_base_delay, timeout_s=timeout), batch=batch,
        max_reply_bytes=max_reply_bytes)
    job = CollectJob(settings, tuple(cases_from_store(target, run["dataset_sha256"])), answer=False)

    def prepare(store: Store, job: CollectJob) -> None:
        record_judge(store, store.run(run_id), judge_model, judge_endpoint.describe(), job.settings.judge_passes)

    return Collection(target, job, table, prepare)


def rejudge(run_id: str, judge_model: str, *, store: StoreLike = None, passes: int | Sequence[int] | None = None,
            judge_passes: int | None = None, judge_base_url: str | None = None, judge_api_key_env: str | None = None,
            concurrency: int = DEFAULT_CONCURRENCY, max_retries: int = protocol.REFERENCE_MAX_ATTEMPTS,
            judge_reasks: int = DEFAULT_JUDGE_REASKS, timeout: float = DEFAULT_TIMEOUT_S,
            retry_base_delay: float = DEFAULT_RETRY_BASE_DELAY, batch: bool = False,
            providers: ProvidersLike = None, progress: Progress = DEFAULT_PROGRESS,
            say: Say | None = None, max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES) -> RunReport:
    """Judge run ``run_id``'s stored answers with ``judge_model`` (another judge, or the same again).

    No answer is regenerated and passes already judged validly are skipped. ``passes``: the pass
    number(s) to collect (e.g. 2 for a second pass); ``judge_passes``: passes 1..K; give one of the
    two (default: pass 1). The judge's endpoint defaults as for ``evaluate``: the run's answer
    endpoint when both models belong to the same named provider, else by the provider table.
    The other parameters and the report are as for ``evaluate``.
    """
    return plan_rejudge(
        run_id, judge_model, store=store, passes=passes, judge_passes=judge_passes, judge_base_url=judge_base_url,
        judge_api_key_env=judge_api_key_env, concurrency=concurrency, max_retries=max_retries,
        judge_reasks=judge_reasks, timeout=timeout, retry_base_delay=retry_base_delay, batch=batch,
        providers=providers, max_reply_bytes=max_reply_bytes).run(progress, say)


def _store(store: StoreLike) -> Store:
    return store if isinstance(store, Store) else Store.open(store)


def _providers(providers: ProvidersLike) -> ProviderTable:
    return providers if isinstance(providers, ProviderTable) else load_providers(providers)


def _silent(_: str) -> None:
    pass


def _default_say(progress: Progress) -> Say:
    return _silent if progress == "none" else print


def _check_ints(**values: int | None) -> None:
    """ValueError naming the option when a given value is not an integer inside INT_RANGES."""
    for name, value in values.items():
        if value is None:
            continue
        low, high = INT_RANGES[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
            bound = f"at least {low}" if high is None else f"{low}..{high}"
            raise ValueError(f"{name}={value!r}: must be an integer {bound}")


def _check_floats(**values: float) -> None:
    """ValueError naming the option when a value is not a number inside FLOAT_RANGES."""
    for name, value in values.items():
        low, high = FLOAT_RANGES[name]
        if (isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= low
                or (high is not None and value > high)):
            bound = f"at least {low}" if high is None else f"{low}..{high}"
            raise ValueError(f"{name}={value!r}: must be a number {bound}")
