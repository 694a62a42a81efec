"""The simulated OpenAI-compatible provider: a test double and the demo's engine, not part of collection.

``SimConfig`` (settings, ``toolkit.sim.config``) and ``SimServer`` (the aiohttp server on a thread of its
own, ``toolkit.sim.server``) are loaded on first use, so importing ``toolkit.sim.config`` or
``toolkit.sim.models`` never pulls in the web stack:

    from toolkit.sim import SimConfig, SimServer
    with SimServer(SimConfig(rate_429=0.1)) as sim:
        client = openai.OpenAI(base_url=sim.base_url, api_key="any")
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {"SimConfig": "toolkit.sim.config", "SimServer": "toolkit.sim.server"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'toolkit.sim' has no attribute {name!r}")
    return getattr(import_module(module), name)
