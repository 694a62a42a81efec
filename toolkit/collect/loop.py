"""The event loop a collection runs on: Ctrl-C handling, a quiet garbage collector, and running from
inside an already running loop (a Jupyter kernel) on a thread of its own.
"""

from __future__ import annotations

import asyncio
import gc
import signal
import threading
from contextlib import contextmanager
from typing import Any, Awaitable, Callable, Coroutine, Iterator, TypeVar

T = TypeVar("T")

# The stop function of each loop currently inside ``interruptible``: ``run_sync`` calls it when the
# thread that waits for a collection on another thread is interrupted (a kernel interrupt in Jupyter).
_STOPS: dict[asyncio.AbstractEventLoop, Callable[[], None]] = {}


def run_sync(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``asyncio.run(make())``, also when this thread already runs an event loop.

    ``asyncio.run`` refuses to start inside a running loop, which is where a notebook cell runs; there
    the coroutine runs on a dedicated thread with its own loop while this thread waits. A
    KeyboardInterrupt while waiting (Jupyter's interrupt) stops the collection the way Ctrl-C does:
    the calls in flight are cancelled, what completed is stored, and the report says interrupted.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    outcome: dict[str, Any] = {}
    finished = threading.Event()

    def target() -> None:
        async def main() -> T:
            outcome["loop"] = asyncio.get_running_loop()
            return await make()

        try:
            outcome["value"] = asyncio.run(main())
        except BaseException as error:  # handed to the waiting thread
            outcome["error"] = error
        finally:
            finished.set()

    threading.Thread(target=target, name="bedside-collect", daemon=True).start()
    interrupt = False
    while True:
        try:  # (an Event, not Thread.join: an interrupted join can leave the thread looking finished)
            if finished.wait(0.05):
                break
        except KeyboardInterrupt:
            interrupt = True
        loop = outcome.get("loop")
        stop = _STOPS.get(loop) if loop is not None else None
        if interrupt and stop is not None and loop is not None:
            try:
                loop.call_soon_threadsafe(stop)  # the collection winds down and reports itself interrupted
            except RuntimeError:  # the loop closed in between: it had finished anyway
                pass
            interrupt = False
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@contextmanager
def quiet_gc(gen0_threshold: int = 20_000) -> Iterator[None]:
    """Keep the cyclic garbage collector off the event loop while calls are in flight.

    The SDK allocates thousands of short-lived objects per call; with the default thresholds a
    collection runs every few calls and, now and then, a full pass over every object the process holds
    (polars, pyarrow and the SDK's models included) stalls the loop for tens of milliseconds while a hundred replies
    wait. Freezing what exists before the run takes it out of those passes; a larger first-generation
    threshold makes collections rare. Both are undone afterwards.
    """
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(old[0], gen0_threshold), old[1], old[2])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


async def interruptible(work: Awaitable[None], fatal: tuple[type[BaseException], ...] = ()) -> bool:
    """Await ``work``; True when SIGINT/SIGTERM (or ``run_sync``'s interrupt) cancelled it.

    ``work``'s own cleanup has run by then. When ``work`` fails with an exception group (a TaskGroup),
    the first exception of a ``fatal`` kind is raised alone, so callers can report it in one line.
    """
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    stopped = False

    def stop() -> None:
        nonlocal stopped
        if not stopped:
            stopped = True
            main.cancel()

    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop)
            installed.append(sig)
        except (ValueError, RuntimeError, NotImplementedError):  # not the main thread
            pass
    _STOPS[loop] = stop
    try:
        await work
    except asyncio.CancelledError:
        if not stopped:
            raise
        main.uncancel()
    except BaseExceptionGroup as failures:
        found = first_of(failures, fatal) if fatal else None
        if found is not None:
            raise found from None
        raise
    finally:
        _STOPS.pop(loop, None)
        for sig in installed:
            loop.remove_signal_handler(sig)
    return stopped


def first_of(group: BaseExceptionGroup, kinds: tuple[type[BaseException], ...]) -> BaseException | None:
    """The first exception of one of ``kinds`` in a (nested) exception group."""
    for error in group.exceptions:
        if isinstance(error, kinds):
            return error
        if isinstance(error, BaseExceptionGroup):
            found = first_of(error, kinds)
            if found is not None:
                return found
    return None
