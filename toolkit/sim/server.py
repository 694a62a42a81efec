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
import threading
from typing import Any

from aiohttp import web

from toolkit.sim.batch import add_batch_routes
from toolkit.sim.chat import PROVIDER, SimProvider, chat_handler, models_handler, stats_handler
from toolkit.sim.config import SimConfig

_MAX_BODY = 512 * 1024 * 1024  # batch input files can be large


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
