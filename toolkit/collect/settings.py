"""Collection settings: endpoints from the provider table, keys from the environment.

Keys are read from environment variables at the last moment and never stored
in a settings object, a file or a message: settings carry variable NAMES only. Prices live in
``toolkit.prices`` (their own table, ``--prices`` / ``$BEDSIDE_PRICES``), not here.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit import protocol

PROVIDERS_FILE = Path(__file__).with_name("providers.toml")
NO_KEY = "no-key"  # what the SDK is given for an endpoint that needs none (it insists on a value)

# Defaults of the collection options, shared by the Python API (toolkit.collect.api) and the CLI flags.
# The attempt count is protocol.REFERENCE_MAX_ATTEMPTS (the reference runner's), not restated here.
DEFAULT_CONCURRENCY = 16
DEFAULT_JUDGE_PASSES = 1
DEFAULT_ANSWER_SAMPLES = 1  # the protocol's one answer per case
DEFAULT_JUDGE_REASKS = 2
DEFAULT_TIMEOUT_S = 600.0
DEFAULT_RETRY_BASE_DELAY = 1.0
# The largest legitimate reply is 32,000 completion tokens (protocol.ANSWER_MAX_COMPLETION_TOKENS): ~130 KB of
# text, ~400 KB even if every character came \u-escaped; 1 MiB leaves room, a runaway provider is cut off.
DEFAULT_MAX_REPLY_BYTES = 1 << 20
PROGRESS_MODES = ("auto", "rich", "plain", "none")  # auto: a bar on a terminal, plain lines otherwise
DEFAULT_PROGRESS = "auto"

# Accepted (lowest, highest) of each option, highest None when unbounded: the CLI's click ranges and
# the API's checks, so a notebook cannot ask for what the command line refuses.
INT_RANGES: dict[str, tuple[int, int | None]] = {
    "concurrency": (1, 1000),
    "judge_passes": (1, 100),  # also each pass number given to --pass / passes=
    "answer_samples": (1, 100),  # independent answers per case (--answer-samples; not --samples, the resamples)
    "max_retries": (1, 100),
    "judge_reasks": (0, 20),
    "limit": (1, None),
    "max_reply_bytes": (1024, None),
}
FLOAT_RANGES: dict[str, tuple[float, float | None]] = {
    "timeout": (0.1, None),
    "retry_base_delay": (0.0, 60.0),
}


class SettingsError(ValueError):
    """A configuration problem found before any call is made."""


@dataclass(frozen=True)
class Endpoint:
    """Where one model's calls go. ``key_envs``: variables tried in order (empty: no key needed)."""

    provider: str
    base_url: str
    key_envs: tuple[str, ...]

    def key_env(self) -> str | None:
        """The first variable that is set, else None."""
        return next((name for name in self.key_envs if os.environ.get(name)), None)

    def api_key(self, role: str = "answer") -> str:
        """The key to send; SettingsError naming the variables (and the flags) when none is set."""
        if not self.key_envs:
            return NO_KEY
        name = self.key_env()
        if name is None:
            names = " or ".join(f"${n}" for n in self.key_envs)
            prefix = "--judge-" if role == "judge" else "--"
            raise SettingsError(f"no API key for the {role} model at {self.base_url}: set {names}, or point "
                                f"{prefix}api-key-env at the variable holding it (endpoint: {prefix}base-url)")
        return os.environ[name]

    def describe(self) -> dict[str, Any]:
        """For the runs row and dry-run output: URL and variable names, never the key."""
        return {"provider": self.provider, "base_url": self.base_url, "api_key_env": list(self.key_envs)}


@dataclass(frozen=True)
class ProviderTable:
    default: dict[str, Any]
    providers: tuple[dict[str, Any], ...]
    answer_completion_tokens: int
    judge_completion_tokens_per_item: int
    source: Path

    def match(self, model: str) -> dict[str, Any] | None:
        hits = [p for p in self.providers if model.startswith(p["prefix"])]
        return max(hits, key=lambda p: len(p["prefix"])) if hits else None


def load_providers(path: str | os.PathLike[str] | None = None) -> ProviderTable:
    """The provider table: ``path``, else ``$BEDSIDE_PROVIDERS``, else the bundled one."""
    source = Path(path or os.environ.get("BEDSIDE_PROVIDERS") or PROVIDERS_FILE)
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
    except OSError as error:
        raise SettingsError(f"{source}: {error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise SettingsError(f"{source}: invalid TOML: {error}") from None
    default = data.get("default") or {}
    if not isinstance(default.get("base_url"), str):
        raise SettingsError(f"{source}: default.base_url: missing or not a string")
    providers = tuple(data.get("provider", []))
    for i, entry in enumerate(providers):
        if not isinstance(entry.get("prefix"), str) or not entry["prefix"]:
            raise SettingsError(f"{source}: provider[{i}].prefix: missing or not a string")
        if not isinstance(entry.get("api_key_env", []), list):
            raise SettingsError(f"{source}: provider[{i}].api_key_env: must be a list of variable names")
    if "prices" in data:  # prices moved to their own table: a silent drop would price nothing
        raise SettingsError(f"{source}: [prices] is no longer read here: put the prices in a price table "
                            "(--prices FILE or $BEDSIDE_PRICES; format in toolkit.prices)")
    estimate = data.get("estimate", {})
    return ProviderTable(default, providers, int(estimate.get("answer_completion_tokens", 900)),
                         int(estimate.get("judge_completion_tokens_per_item", 14)), source)


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_env_name(name: str | None, flag: str) -> None:
    """SettingsError when ``name`` is not an environment variable name. The value is never echoed:
    a key pasted where its variable's name belongs must not end up in a terminal or a log."""
    if name is not None and not _ENV_NAME.fullmatch(name):
        raise SettingsError(f"{flag}: expects the NAME of an environment variable (letters, digits and _, not "
                            "starting with a digit), not the key itself; the value given is not shown")


def resolve_endpoint(table: ProviderTable, model: str, base_url: str | None, key_env: str | None,
                     flag: str = "--base-url") -> Endpoint:
    """The endpoint of ``model``; an explicit URL takes its key only from ``key_env``."""
    check_env_name(key_env, "--judge-api-key-env" if flag == "--judge-base-url" else "--api-key-env")
    if base_url:
        # httpx would refuse it only at the first call, after the run had made its store folder.
        bad = next((ch for ch in base_url if not ch.isprintable() or ch.isspace()), None)
        if bad is not None:
            raise SettingsError(f"{flag} {base_url!r}: holds a space or control character (U+{ord(bad):04X}); not a URL")
        return Endpoint("custom", base_url.rstrip("/"), (key_env,) if key_env else ())
    entry = table.match(model) or {"name": table.default.get("name", "default"), **table.default}
    url = entry.get("base_url")
    if not url:
        raise SettingsError(f"model {model!r} ({entry.get('name', entry.get('prefix'))} provider) needs {flag} URL"
                            + (" (start one with `bedside sim serve`)" if entry.get("name") == "sim" else ""))
    envs = (key_env,) if key_env else tuple(entry.get("api_key_env", ()))
    return Endpoint(str(entry.get("name", entry.get("prefix"))), url.rstrip("/"), envs)


def resolve_judge_endpoint(table: ProviderTable, answer_model: str, answer: Endpoint | None, judge_model: str,
                           base_url: str | None, key_env: str | None) -> Endpoint:
    """The judge's endpoint: explicit flags, else the answer endpoint when both models belong to the
    same named provider (sim/ with sim/, accounts/ with accounts/), else the judge's own provider."""
    check_env_name(key_env, "--judge-api-key-env")
    if base_url:
        return resolve_endpoint(table, judge_model, base_url, key_env, "--judge-base-url")
    same = table.match(judge_model)
    if answer is not None and same is not None and same is table.match(answer_model):
        return Endpoint(answer.provider, answer.base_url, (key_env,) if key_env else answer.key_envs)
    return resolve_endpoint(table, judge_model, None, key_env, "--judge-base-url")


@dataclass(frozen=True)
class RetryPolicy:
    """Transport retries: ``max_attempts`` calls at most, full-jitter exponential back-off."""

    max_attempts: int = protocol.REFERENCE_MAX_ATTEMPTS
    base_delay: float = DEFAULT_RETRY_BASE_DELAY
    max_delay: float = 60.0
    timeout_s: float = DEFAULT_TIMEOUT_S


@dataclass(frozen=True)
class CollectSettings:
    """Everything a collection run needs besides the dataset and the store."""

    run_id: str
    answer_model: str
    judge_model: str
    answer_endpoint: Endpoint | None  # None when only judging stored answers
    judge_endpoint: Endpoint
    concurrency: int = DEFAULT_CONCURRENCY
    judge_passes: tuple[int, ...] = tuple(range(1, DEFAULT_JUDGE_PASSES + 1))
    reasoning_effort: str | None = None
    judge_reasks: int = DEFAULT_JUDGE_REASKS  # extra judge calls after an invalid reply
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    # Seconds between checkpoints while calls complete (the journal keeps them safe in between): each one
    # commits and re-scores the whole run so far, CPU taken from the calls in flight.
    checkpoint_s: float = 5.0
    # Registered `bedside db` files are refreshed (each a DuckDB file rewritten) at most this often while the run is
    # collected, and always once at its end (the finished run shows there); the checkpoints in between
    # only mark a refresh as due.
    db_refresh_s: float = 30.0
    batch: bool = False  # through the Batch API instead of direct calls
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES  # a bigger reply is a failed call, neither stored nor kept
    selection: dict[str, Any] = field(default_factory=dict)  # smoke / limit / benchmarks, for the runs row
    answer_samples: int = DEFAULT_ANSWER_SAMPLES  # answers 0..K-1 per case, each judged with every pass

    def describe(self) -> dict[str, Any]:
        """The runs row's settings JSON: endpoints by URL and variable names, never keys."""
        return {
            "answer_endpoint": self.answer_endpoint.describe() if self.answer_endpoint else None,
            "judge_endpoint": self.judge_endpoint.describe(),
            "concurrency": self.concurrency,
            "judge_passes": list(self.judge_passes),
            "reasoning_effort": self.reasoning_effort,
            "judge_reasks": self.judge_reasks,
            "max_attempts": self.retry.max_attempts,
            "timeout_s": self.retry.timeout_s,
            "batch": self.batch,
            "selection": self.selection,
            # only when asked: a one-answer run's runs row stays as it always was
            **({"answer_samples": self.answer_samples} if self.answer_samples != DEFAULT_ANSWER_SAMPLES else {}),
        }
