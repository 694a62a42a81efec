"""A simulated OpenAI-compatible provider on loopback: the product's demo backend and the test double.

Answer models (``sim/strong``, ``sim/medium``, ``sim/weak``, ``sim/skill-<0..1>``) write prose whose
content follows the rubric of a known prompt; ``sim/judge`` grades by what an answer says. Faults
(429, 5xx, timeouts, broken judge JSON) are injected at configurable rates from a seeded generator.
The aiohttp app runs on its own event loop in a daemon thread, so synchronous code can use it.

    with SimServer(SimConfig(rate_429=0.1)) as sim:
        client = openai.OpenAI(base_url=sim.base_url, api_key="any")
"""

from __future__ import annotations

import asyncio
import ipaddress
import threading
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from toolkit.collect.sim_batch import add_batch_routes
from toolkit.collect.sim_chat import PROVIDER, SimProvider, chat_handler, models_handler, stats_handler

_MAX_BODY = 512 * 1024 * 1024  # batch input files can be large


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

    def __post_init__(self) -> None:
        if not is_loopback(self.host):
            raise ValueError(f"sim host {self.host!r}: the simulated provider only binds loopback "
                             "(127.0.0.1, ::1 or localhost)")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"sim port {self.port}: must be 0..65535")
        for name in ("rate_429", "rate_5xx", "rate_bad_json", "rate_timeout"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"sim {name} {value}: must be between 0 and 1")
        for name in ("latency_ms", "timeout_hold_s", "retry_after_s", "batch_delay_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"sim {name} {getattr(self, name)}: must not be negative")
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


def build_app(provider: SimProvider) -> web.Application:
    app = web.Application(client_max_size=_MAX_BODY)
    app[PROVIDER] = provider
    app.router.add_post("/v1/chat/completions", chat_handler)
    app.router.add_get("/v1/models", models_handler)
    app.router.add_get("/v1/models/{model:.+}", models_handler)
    app.router.add_get("/stats", stats_handler)
    app.router.add_post("/stats/reset", stats_handler)
    add_batch_routes(app)
    return app


class SimServer:
    """The simulated provider on its own event loop thread. Datasets load in the constructor,
    so a bad ``--dataset`` fails before anything listens."""

    def __init__(self, config: SimConfig = SimConfig()):
        self.config = config
        self.provider = SimProvider(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._startup_error: BaseException | None = None

    @property
    def base_url(self) -> str:
        if self._port is None:
            raise RuntimeError("the simulated provider is not running; call start() first")
        host = f"[{self.config.host}]" if ":" in self.config.host else self.config.host
        return f"http://{host}:{self._port}/v1"

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the simulated provider is not running; call start() first")
        return self._port

    def start(self) -> SimServer:
        if self._thread is not None:
            raise RuntimeError("the simulated provider is already running")
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="bedside-sim", daemon=True)
        self._thread.start()
        ready.wait()
        if self._startup_error is not None:
            self._thread.join()
            self._thread = self._loop = None
            error, self._startup_error = self._startup_error, None
            raise error
        return self

    def stop(self) -> None:
        if self._thread is None or self._loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._thread = self._loop = self._runner = None
        self._port = None

    def stats(self) -> dict[str, Any]:
        """Same as ``GET /stats``."""
        return self.provider.stats.snapshot()

    def reset_stats(self) -> None:
        self.provider.stats.reset()

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- loop thread ---------------------------------------------------------

    def _run(self, ready: threading.Event) -> None:
        loop = self._loop
        assert loop is not None
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._startup())
        except BaseException as error:  # reported to start() in the caller's thread
            self._startup_error = error
            loop.close()
            ready.set()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _startup(self) -> None:
        self.provider.stopping = asyncio.Event()
        # handler_cancellation: a client that gives up on a held request cancels its handler
        self._runner = web.AppRunner(build_app(self.provider), handler_cancellation=True,
                                     access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.host, self.config.port)
        try:
            await site.start()
        except BaseException:
            await self._runner.cleanup()
            raise
        self._port = int(self._runner.addresses[0][1])

    async def _shutdown(self) -> None:
        assert self.provider.stopping is not None and self._runner is not None
        self.provider.stopping.set()  # releases held timeouts and batch workers
        await self._runner.cleanup()
