"""Settings of the simulated provider: plain data, no web stack (``bedside sim serve --help`` reads them)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

# A third of a case's rubric items drawn afresh each time the case is asked again: repeated answers differ
# as a model's do. `bedside sim serve` and the demo use it; SimConfig keeps 0 (every answer the same).
REALISTIC_ANSWER_SPREAD = 0.3

@dataclass(frozen=True)
class SimConfig:
    """Settings of one simulated provider. Rates are per-request probabilities in [0, 1]."""

    host: str = "127.0.0.1"
    port: int = 0  # 0 = any free port
    latency_ms: float = 0.0  # added before every reply except a held timeout
    rate_429: float = 0.0
    rate_5xx: float = 0.0
    rate_bad_json: float = 0.0  # sim/judge only: a 200 reply that breaks the decision contract
    rate_timeout: float = 0.0
    seed: int = 0
    datasets: tuple[str, ...] = ()  # rubric sources; empty = the bundled sample
    timeout_hold_s: float = 30.0  # a "timeout" fault holds the request this long, then answers 504
    retry_after_s: float = 0.05  # advertised by 429 replies
    api_key: str | None = None  # when set, any other bearer key gets 401
    batch_delay_s: float = 0.05  # how long a batch stays in each intermediate status
    batch_failures: int = 0  # the first N batches fail as a whole (as when a provider rejects one)
    # A real request-rate limit (token bucket): this many chat requests per second on average, bursts of up
    # to ``rate_limit_burst`` (default: one second's worth); 0 = none. Requests over it get an immediate 429
    # whose Retry-After is the time until a token is free.
    rate_limit_rps: float = 0.0
    rate_limit_burst: int = 0
    # Share of a case's rubric items an answer model treats afresh each time the case is asked (0: the same
    # answer every time; 1: independent answers), so repeated answers to a case differ.
    answer_spread: float = 0.0

    def __post_init__(self) -> None:
        if not is_loopback(self.host):
            raise ValueError(f"sim host {self.host!r}: the simulated provider only binds loopback "
                             "(127.0.0.1, ::1 or localhost)")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"sim port {self.port}: must be 0..65535")
        for name in ("rate_429", "rate_5xx", "rate_bad_json", "rate_timeout", "answer_spread"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"sim {name} {value}: must be between 0 and 1")
        for name in ("latency_ms", "timeout_hold_s", "retry_after_s", "batch_delay_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"sim {name} {getattr(self, name)}: must not be negative")
        if self.rate_limit_rps < 0 or self.rate_limit_burst < 0:
            raise ValueError("sim rate_limit_rps and rate_limit_burst: must not be negative")
        if self.batch_failures < 0:
            raise ValueError(f"sim batch_failures {self.batch_failures}: must not be negative")
        if self.api_key is not None and not self.api_key:
            raise ValueError("sim api_key: must be non-empty when given")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
