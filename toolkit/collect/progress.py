"""Progress of a collection: a rich bar on a terminal, plain periodic lines otherwise, or nothing.

Both views read the same counters; they say when calls are sleeping on a
provider's rate limit and how far the adaptive concurrency has been lowered.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Callable, TextIO

from toolkit.collect.client import AdaptiveLimit, CallStats
from toolkit.text import visible


@dataclass
class Counts:
    answers_total: int = 0
    judgments_total: int = 0
    answers_done: int = 0
    judgments_done: int = 0
    answer_errors: int = 0
    judge_errors: int = 0
    reasks: int = 0  # invalid judge replies asked again


@dataclass
class Tracker:
    """Counters plus the client stats and limits they are shown with."""

    label: str
    stats: list[CallStats] = field(default_factory=list)
    limits: list[AdaptiveLimit] = field(default_factory=list)
    runs: list[Counts] = field(default_factory=list)  # one per run being collected
    started: float = field(default_factory=time.monotonic)

    @property
    def counts(self) -> Counts:
        """The runs' counters summed."""
        total = Counts()
        for run in self.runs:
            for name in vars(total):
                setattr(total, name, getattr(total, name) + getattr(run, name))
        return total

    @property
    def done(self) -> int:
        c = self.counts
        return c.answers_done + c.judgments_done

    @property
    def total(self) -> int:
        c = self.counts
        return c.answers_total + c.judgments_total

    def status(self) -> str:
        c = self.counts
        retries = sum(s.retries for s in self.stats)
        waiting = sum(s.waiting_rate_limit for s in self.stats)
        parts = [f"errors {c.answer_errors + c.judge_errors}", f"retries {retries}"]
        if c.reasks:
            parts.append(f"judge re-asks {c.reasks}")
        lowered = [f"{lim.permitted}/{lim.maximum}" for lim in self.limits if lim.permitted < lim.maximum]
        if lowered:
            parts.append("concurrency " + ",".join(lowered))
        if waiting:
            parts.append(f"waiting on rate limit ({waiting} calls)")
        return ", ".join(parts)

    def line(self) -> str:
        c = self.counts
        elapsed = time.monotonic() - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = f"{(self.total - self.done) / rate:.0f}s" if rate > 0 else "?"
        return (f"{self.label}: {self.done}/{self.total} calls (answers {c.answers_done}/{c.answers_total}, "
                f"judgments {c.judgments_done}/{c.judgments_total}), {rate:.1f}/s, ETA {eta}, {self.status()}")


class View:
    """No output; subclasses draw."""

    def __init__(self, tracker: Tracker):
        self.tracker = tracker

    def start(self) -> None: ...

    def update(self) -> None: ...

    def tick(self) -> None: ...

    def stop(self) -> None: ...


class PlainView(View):
    """One line every ``interval`` seconds (from ``tick``) and a last one at the end."""

    def __init__(self, tracker: Tracker, out: TextIO, interval: float = 10.0):
        super().__init__(tracker)
        self.out = out
        self.interval = interval
        self._last = time.monotonic()

    def tick(self) -> None:
        if time.monotonic() - self._last >= self.interval:
            self._emit()

    def stop(self) -> None:
        self._emit()

    def _emit(self) -> None:
        self._last = time.monotonic()
        print(visible(self.tracker.line()), file=self.out, flush=True)  # the run id comes from the user


class RichView(View):
    """A bar (done/total, %, rate, elapsed, ETA) with the status line beneath it."""

    def __init__(self, tracker: Tracker, out: TextIO, force_terminal: bool | None = None):
        super().__init__(tracker)
        from rich.console import Console, Group
        from rich.live import Live
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)
        from rich.markup import escape
        from rich.text import Text

        self._progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(bar_width=30), MofNCompleteColumn(),
            TaskProgressColumn(), TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("ETA"),
            TimeRemainingColumn())
        self._task = self._progress.add_task(escape(visible(tracker.label)), total=max(1, tracker.total), rate="", start=False)
        self._status = Text()
        self._console = Console(file=out, force_terminal=force_terminal)
        self._live = Live(Group(self._progress, self._status), console=self._console, refresh_per_second=4)

    def start(self) -> None:
        self._live.start()
        self._progress.start_task(self._task)
        self.update()

    def update(self) -> None:
        t = self.tracker
        elapsed = time.monotonic() - t.started
        rate = f"{t.done / elapsed:.1f} calls/s" if elapsed > 0 else ""
        self._progress.update(self._task, total=max(1, t.total), completed=t.done, rate=rate)
        self._status.plain = "  " + visible(t.status())

    def tick(self) -> None:
        self.update()

    def stop(self) -> None:
        self.update()
        self._live.stop()
        if not self._console.is_terminal:  # rich ends the last frame with a newline only on a terminal
            self._console.line()


ViewFactory = Callable[[Tracker], View]


def view_factory(mode: str = "auto", out: TextIO | None = None, interval: float = 10.0) -> ViewFactory:
    """``auto``: rich on a terminal, plain lines otherwise; or ``rich``, ``plain``, ``none``."""
    stream = out or sys.stdout
    chosen = ("rich" if stream.isatty() else "plain") if mode == "auto" else mode
    if chosen == "rich":
        return lambda tracker: RichView(tracker, stream)
    if chosen == "plain":
        return lambda tracker: PlainView(tracker, stream, interval)
    return View
