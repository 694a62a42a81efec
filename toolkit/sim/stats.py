"""Counters of the simulated provider, so tests can check what a client actually paid for.

"Paid" means a 200 chat completion, served directly or as a batch line. Every paid request's
(model, messages) fingerprint is remembered for the server's lifetime (until a reset), so a
second paid request with the same fingerprint shows up in ``duplicates_ok``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from typing import Any

FAULT_KINDS = ("429", "5xx", "timeout", "bad_json", "temperature_rejected", "auth", "not_found", "bad_request",
               "unknown_case", "rate_limit")
BATCH_COUNTERS = ("files_uploaded", "created", "completed", "failed", "cancelled",
                  "requests", "served_ok", "requests_failed", "duplicates_ok", "bad_json")


def fingerprint(model: str, messages: Any) -> str:
    """A stable digest of what makes two chat requests the same paid work."""
    payload = json.dumps({"model": model, "messages": messages}, sort_keys=True, ensure_ascii=False,
                         separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


class SimStats:
    """Thread-safe counters; ``snapshot()`` is the body of ``GET /stats``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._chat: dict[str, Any] = {
                "received": 0, "served_ok": 0, "duplicates_ok": 0, "by_model": {},
                "faults": {k: 0 for k in FAULT_KINDS}, "bad_json_kinds": {},
            }
            self._batches: dict[str, Any] = {k: 0 for k in BATCH_COUNTERS}
            self._batches["by_model"] = {}
            self._paid: set[str] = set()

    def received(self, model: str | None) -> None:
        with self._lock:
            self._chat["received"] += 1
            if model is not None:
                self._model(self._chat, model)["received"] += 1

    def fault(self, kind: str, detail: str | None = None) -> None:
        with self._lock:
            self._chat["faults"][kind] += 1
            if kind == "bad_json" and detail:
                kinds = self._chat["bad_json_kinds"]
                kinds[detail] = kinds.get(detail, 0) + 1

    def served(self, model: str, messages: Any, *, batch: bool = False) -> None:
        """Record a paid (200) completion."""
        key = fingerprint(model, messages)
        with self._lock:
            section = self._batches if batch else self._chat
            section["served_ok"] += 1
            self._model(section, model)["served_ok"] += 1
            if key in self._paid:
                section["duplicates_ok"] += 1
            self._paid.add(key)

    def batch_line(self, model: str | None, ok: bool) -> None:
        """Count one processed batch line (``served`` records the paid ones separately)."""
        with self._lock:
            self._batches["requests"] += 1
            if model is not None:
                self._model(self._batches, model)["received"] += 1
            if not ok:
                self._batches["requests_failed"] += 1

    def batch_event(self, counter: str) -> None:
        with self._lock:
            self._batches[counter] += 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"chat_completions": copy.deepcopy(self._chat), "batches": copy.deepcopy(self._batches)}

    @staticmethod
    def _model(section: dict[str, Any], model: str) -> dict[str, int]:
        return section["by_model"].setdefault(model, {"received": 0, "served_ok": 0})
