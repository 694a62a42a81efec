"""What a report is built with, and the ``bedside report`` command line that builds it again."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit.protocol import BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED, check_samples, check_seed
from toolkit.selection import JudgeSelection

if TYPE_CHECKING:
    from toolkit.store import Store


@dataclass(frozen=True, kw_only=True)
class ReportOptions:
    baseline: str | None = None
    title: str | None = None
    samples: int = BOOTSTRAP_SAMPLES
    seed: int = BOOTSTRAP_SEED
    selection: JudgeSelection = field(default_factory=JudgeSelection)
    allow_mixed: bool = False
    dataset: str | None = None  # a dataset checkout whose name labels the digest it matches
    figures: bool = True  # False: tables and text only (faster)
    prices: str | None = None  # price table file (None: $BEDSIDE_PRICES, else the built-in table)

    def __post_init__(self) -> None:
        object.__setattr__(self, "samples", check_samples(self.samples))  # numpy's integers stored as ints
        object.__setattr__(self, "seed", check_seed(self.seed))


def regenerate_command(run_ids: list[str] | None, store: Store, options: ReportOptions) -> str:
    """The ``bedside report`` command that rebuilds this report (``--out`` left to the reader, so the text does
    not depend on where this copy was written). ``run_ids`` None: ``--all``."""
    words = ["bedside", "report"]
    words += ["--all"] if run_ids is None else [w for r in run_ids for w in ("--run", r)]
    if options.baseline is not None:
        words += ["--baseline", options.baseline]
    if options.title is not None:
        words += ["--title", options.title]
    if options.selection.judge is not None:
        words += ["--judge", options.selection.judge]
    for p in options.selection.passes or ():
        words += ["--pass", str(p)]
    if options.allow_mixed:
        words.append("--allow-mixed")
    if options.dataset is not None:
        words += ["--dataset", str(Path(options.dataset).resolve())]
    if options.prices is not None:
        words += ["--prices", str(Path(options.prices).resolve())]
    words += ["--samples", str(options.samples), "--seed", str(options.seed)]
    words += ["--store", str(store.root.resolve())]
    return shlex.join(words)
