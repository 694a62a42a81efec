"""How many calls may be in flight at one endpoint: a window that finds a provider's sustained rate limit
without collapsing under 429s that are not this client's doing, and that slow calls cannot block.

Why not plain AIMD (halve on every 429): real providers send 429s that no lower concurrency would avoid
(shared limits, token-per-minute buckets, plain noise), and at a steady 20 % of such 429s halving on each
one holds the window at 1-2 calls, where one call held for 30 s stops everything. Instead:

* Decisions are made once per *generation*: after a window's worth (at least ``GENERATION_MIN``) of calls
  that were sent after the previous decision have finished. A generation's 429 share is what is judged,
  never a single 429, so the window changes at most once per round trip.
* A share above what chance allows at the ``background`` share (two standard errors, at least 10 points)
  cuts the window by ``CUT`` (far over a limit, by up to half), and the next generation tests the cut:
  when the share falls back to the background, a limit was ours and the cut stays; when it does not
  move, the 429s do not answer to our rate: the cut is undone. The background is a moving average of the
  shares of generations that were not cut, so 429s that come whatever we do raise the tolerance instead
  of shrinking the window. A share of 50 % or more is always a limit.
* A generation within the tolerance adds one call to the window (additive increase, up to the maximum),
  a quarter of one near the window where a limit was last confirmed.
* The window never goes below a floor (1/16 of the maximum, at least 1); a 429's Retry-After is a pause of
  that call, taken while it keeps its slot (so the pause itself slows the rate), not a cut.
* A call in flight for longer than ``SLOW_FACTOR`` times the usual latency (at least ``SLOW_MIN_S``) stops
  counting against the window: a held request or a legitimately long answer never starves the others.
  Calls in flight stay bounded by the collector's workers (the ``--concurrency`` maximum per run).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from dataclasses import dataclass

GENERATION_MIN = 8  # calls a decision rests on, at least
CUT = 0.7  # multiplicative decrease
SURE_LIMIT = 0.5  # a 429 share this high is a limit whatever the background
SLOW_FACTOR = 4.0
SLOW_MIN_S = 1.0
SLOW_INITIAL_S = 10.0  # before any call has succeeded

OK, LIMITED, FAILED = "ok", "limited", "failed"


@dataclass(eq=False)
class Slot:
    """One call's place in the window, from ``acquire`` to ``release``."""

    started: float
    counted: bool = True  # False once the call ran long enough to stop counting
    timer: asyncio.TimerHandle | None = None


class AdaptiveLimit:
    """A semaphore whose size (``permitted``) follows the generation rule above."""

    def __init__(self, maximum: int):
        self.maximum = max(1, maximum)
        self.floor = max(1, math.ceil(self.maximum / 16))
        self.window = float(self.maximum)
        self.in_flight = 0  # calls counted against the window
        self.slow = 0  # calls in flight that no longer count
        self.latency: float | None = None  # moving average of successful call latency
        self.background = 0.0  # learned share of 429s that a smaller window does not avoid
        self.ceiling: float | None = None  # window at which a limit was last confirmed
        self.cuts = 0
        self.undone = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._probe: tuple[float, float] | None = None  # (window before the cut, its share) while a cut is tested
        self._new_generation()

    @property
    def permitted(self) -> int:
        return max(1, int(self.window))

    def slow_after(self) -> float:
        return SLOW_INITIAL_S if self.latency is None else max(SLOW_MIN_S, SLOW_FACTOR * self.latency)

    # -- the semaphore ---------------------------------------------------------

    async def acquire(self) -> Slot:
        if self.in_flight < self.permitted and not self._waiters:
            self.in_flight += 1
        else:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self.release()  # granted just as we were cancelled: hand the slot on
                elif waiter in self._waiters:  # (``_wake`` may already have dropped a cancelled waiter)
                    self._waiters.remove(waiter)
                raise
        slot = Slot(time.monotonic())
        slot.timer = asyncio.get_running_loop().call_later(self.slow_after(), self._stop_counting, slot)
        return slot

    def release(self, slot: Slot | None = None) -> None:
        """End a call's slot (``None``: a slot granted to a waiter that was cancelled before it ran)."""
        if slot is not None and slot.timer is not None:
            slot.timer.cancel()
        if slot is None or slot.counted:
            self.in_flight -= 1
        else:
            self.slow -= 1
        self._wake()

    def _stop_counting(self, slot: Slot) -> None:
        if slot.counted:
            slot.counted = False
            self.in_flight -= 1
            self.slow += 1
            self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.permitted:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(None)

    # -- the controller --------------------------------------------------------

    def on_result(self, slot: Slot, outcome: str, latency: float | None = None) -> None:
        """Report how a call ended: ``OK``, ``LIMITED`` (a 429) or ``FAILED`` (5xx, timeout, garbled)."""
        if outcome == OK and latency is not None:
            self.latency = latency if self.latency is None else 0.9 * self.latency + 0.1 * latency
        if slot.started < self._generation_start:
            return  # sent before the last decision: it describes the old window
        self._calls += 1
        self._limited += outcome == LIMITED
        sure = self._limited >= GENERATION_MIN and self._limited >= SURE_LIMIT * self._calls
        if sure or self._calls >= max(GENERATION_MIN, self.permitted):
            self._decide(self._limited / self._calls, self._calls)
            self._new_generation()

    def tolerance(self, calls: int, sigmas: float = 2.0) -> float:
        """The highest 429 share a generation of ``calls`` shows by chance at the background share."""
        spread = math.sqrt(max(self.background, 0.02) * (1.0 - self.background) / calls)
        return self.background + max(0.1 if sigmas >= 2 else 0.05, sigmas * spread)

    def _decide(self, share: float, calls: int) -> None:
        probe, self._probe = self._probe, None
        if share >= SURE_LIMIT:
            self._cut(share)
            return
        if probe is not None:
            before_window, before_share = probe
            if share <= self.tolerance(calls, 1.0):
                self.ceiling = before_window  # the cut brought 429s back to the background: a limit was there
                return
            if share < before_share - 0.1:
                self._cut(share)  # the cut helped but not enough: go on
                return
            # the 429s did not answer to the cut: not ours to fix, and part of the background from now on
            self.window = max(self.window, before_window)
            self._learn(before_share)
            self._learn(share)
            self.undone += 1
            self._wake()
            return
        if share > self.tolerance(calls):
            self._cut(share)
            return
        self._learn(share)
        if self.window < self.maximum:
            # +1 a generation, slower near the window where a limit was last found (fewer 429s there)
            near = self.ceiling is not None and self.window + 1.0 >= self.ceiling * 0.9
            self.window = min(float(self.maximum), self.window + (0.25 if near else 1.0))
            if self.ceiling is not None and self.window > self.ceiling + 1.0:
                self.ceiling = None  # grown past it without a 429: whatever limited us is gone
        self._wake()

    def _learn(self, share: float) -> None:
        """The background moves towards the share of a generation that says nothing about our own rate."""
        self.background = min(SURE_LIMIT, 0.8 * self.background + 0.2 * share)

    def _cut(self, share: float) -> None:
        self._probe = (self.window, share)
        # Far over a limit only about the calls that passed fit: go towards that at once (by half at most).
        factor = CUT if share < SURE_LIMIT else max(0.5, min(CUT, 1.5 * (1.0 - share)))
        self.window = max(float(self.floor), self.window * factor)
        self.cuts += 1

    def _new_generation(self) -> None:
        self._generation_start = time.monotonic()
        self._calls = 0
        self._limited = 0
