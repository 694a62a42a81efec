"""``bedside sim``: run the simulated OpenAI-compatible provider on loopback."""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType

import click

from toolkit.sim.config import REALISTIC_ANSWER_SPREAD

_RATE = click.FloatRange(0.0, 1.0)


@click.group()
def sim() -> None:
    """A simulated model provider for demos and tests (no network beyond loopback)."""


@sim.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Loopback address to bind.")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="0 picks a free port.")
@click.option("--latency-ms", type=click.FloatRange(0.0), default=0.0, show_default=True,
              help="Time from a request to its reply (the simulator's own work included).")
@click.option("--rate-429", type=_RATE, default=0.0, show_default=True, help="Share of calls answered 429.")
@click.option("--rate-5xx", type=_RATE, default=0.0, show_default=True, help="Share answered 500/502/503.")
@click.option("--rate-bad-json", type=_RATE, default=0.0, show_default=True,
              help="Share of judge replies with broken decision JSON.")
@click.option("--rate-timeout", type=_RATE, default=0.0, show_default=True,
              help="Share held for --timeout-hold-s, then answered 504.")
@click.option("--timeout-hold-s", type=click.FloatRange(0.0), default=30.0, show_default=True)
@click.option("--retry-after-s", type=click.FloatRange(0.0), default=0.05, show_default=True,
              help="Retry-After advertised by 429 replies.")
@click.option("--rate-limit-rps", type=click.FloatRange(0.0), default=0.0, show_default=True,
              help="A real request-rate limit (token bucket), requests per second; 0 = none.")
@click.option("--rate-limit-burst", type=click.IntRange(0), default=0, show_default=True,
              help="Requests the bucket saves up (0 = one second's worth).")
@click.option("--answer-spread", type=_RATE, default=REALISTIC_ANSWER_SPREAD, show_default=True,
              help="Share of a case's rubric items answered afresh each time the case is asked again, as in "
              "the demo (0: the same answer every time; 1: independent answers).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of answers and fault draws.")
@click.option("--dataset", "datasets", multiple=True, type=click.Path(exists=False),
              help="Dataset whose rubrics shape the answers (repeatable; default: the bundled sample).")
@click.option("--api-key-env", metavar="NAME",
              help="Accept only the bearer key held in this environment variable (keeps it off the command line).")
def serve(host: str, port: int, latency_ms: float, rate_429: float, rate_5xx: float, rate_bad_json: float,
          rate_timeout: float, timeout_hold_s: float, retry_after_s: float, rate_limit_rps: float,
          rate_limit_burst: int, answer_spread: float, seed: int,
          datasets: tuple[str, ...], api_key_env: str | None) -> None:
    """Serve until Ctrl-C; the first stdout line is the base URL (http://HOST:PORT/v1).

    Answer models: sim/strong, sim/medium and sim/weak (skills 0.85, 0.6, 0.3), and sim/skill-<0..1> for any
    skill (e.g. sim/skill-0.45). Judges: sim/judge (reads the rubric as written) and sim/judge-noisy (misreads
    and slips at set rates: its passes disagree). Each name with the suffix -notemp refuses a request that
    carries a temperature.
    """
    from toolkit.sim.config import SimConfig
    from toolkit.sim.models import LISTED_MODELS
    from toolkit.sim.server import SimServer  # the web stack, only when serving

    api_key = None
    if api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise click.UsageError(f"--api-key-env: environment variable {api_key_env} is unset or empty")
    config = SimConfig(host=host, port=port, latency_ms=latency_ms, rate_429=rate_429, rate_5xx=rate_5xx,
                       rate_bad_json=rate_bad_json, rate_timeout=rate_timeout, seed=seed, datasets=datasets,
                       timeout_hold_s=timeout_hold_s, retry_after_s=retry_after_s, api_key=api_key,
                       rate_limit_rps=rate_limit_rps, rate_limit_burst=rate_limit_burst, answer_spread=answer_spread)
    server = SimServer(config).start()
    stop = threading.Event()

    def on_term(signum: int, frame: FrameType | None) -> None:
        stop.set()

    # both signals end the loop below, even when a parent shell started us with SIGINT ignored
    previous = {sig: signal.signal(sig, on_term) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        click.echo(server.base_url)
        click.echo(f"bedside sim: models {', '.join(LISTED_MODELS)} and sim/skill-<0..1>; Ctrl-C stops", err=True)
        while not stop.wait(0.5):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.stop()
        click.echo("bedside sim: stopped", err=True)
