"""The state of a run's batch in flight: ``batch.json`` in the run's journal folder.

It holds the batch's ids and the meaning of each of its lines (case, attempt,
pass, judge, temperature). It is written before and after ``batches.create``
and removed once the batch's lines are stored, so while it exists the provider
may be working (and charging) for lines the store does not hold yet: a direct
run refuses to start until the batch is collected or cancelled.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

STATE_FILE = "batch.json"


class PendingBatch(RuntimeError):
    """A direct run was asked for while the run has a batch in flight at the provider."""


def state_path(journal_folder: Path) -> Path:
    return journal_folder / STATE_FILE


def load_state(journal_folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads(state_path(journal_folder).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def save_state(journal_folder: Path, state: dict[str, Any] | None) -> None:
    """Write (atomically, synced) or, for None, remove the state."""
    path = state_path(journal_folder)
    if state is None:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(state, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def refuse_pending(journal_folder: Path, run_id: str) -> None:
    """PendingBatch when the run has a batch in flight (checked under the run's lock)."""
    state = load_state(journal_folder)
    if state is None:
        return
    which = f"{state.get('kind', '?')} batch {state.get('batch_id') or '(being submitted)'}"
    raise PendingBatch(f"run {run_id!r} has {which} in flight at the provider: collect it with --batch, or "
                       "cancel it with --cancel-batch (a direct run now would pay for those calls again)")
