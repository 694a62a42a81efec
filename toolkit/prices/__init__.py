"""Prices of model calls in US dollars: the one price table and the one rule that turns tokens into dollars.

Nothing is fetched: prices change, and only the user knows today's. The table is a TOML file given by
``--prices FILE`` (``prices=`` in the API), else ``$BEDSIDE_PRICES``, else the built-in one, which prices
only the simulated provider (``sim/*``, free). A model without a price stays unpriced: callers show
its tokens, never a guessed dollar figure. The file::

    batch_discount = 0.5          # optional: Batch API calls cost this fraction (for every model)

    [models."gpt-4.1-mini"]       # USD per 1M tokens
    input = 0.40
    output = 1.60
    reasoning = 1.60              # optional: defaults to the output rate
    batch_discount = 0.5          # optional: this model's own fraction

    [models."accounts/fireworks/*"]
    input = 0.9
    output = 0.9

Matching: a key without ``*`` prices exactly that model id; a key ending in ``*`` prices every id that
starts with what precedes it. The exact id wins, else the longest such prefix; a bare ``gpt-4.1`` does
not price ``gpt-4.1-mini`` (a different price), so nothing is priced by accident.

Dollars of a call: the providers' completion_tokens include the reasoning tokens, so with r reasoning
tokens (null: 0, and never more than the completion) of c completion tokens and p prompt tokens,

    usd = (p * input + (c - r) * output + r * reasoning) / 1e6      (x batch_discount for batch calls),

which is c * output when no reasoning rate is given: reasoning is counted once. A batch call whose
model and table give no batch discount is unpriced.
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.inputs import InputError, read_text

PRICES_ENV = "BEDSIDE_PRICES"
PRICE_FILE_LIMIT = 1 << 20  # bytes: a table of every model anyone prices is a few kB
PER_TOKENS = 1_000_000
# Highest rate taken (USD per 1M tokens: a dollar a token, far above any model's): beyond it tokens x rate can
# overflow to inf, a "$inf" no one was charged.
MAX_RATE = 1_000_000.0


class PriceError(ValueError):
    """A price table that cannot be read: one line naming the file and the field."""


@dataclass(frozen=True)
class ModelPrice:
    """USD per 1M tokens; ``reasoning`` None: the output rate; ``batch_discount`` None: the table's."""

    input: float
    output: float
    reasoning: float | None = None
    batch_discount: float | None = None


@dataclass(frozen=True)
class PriceTable:
    """Model key (exact id, or a prefix ending in ``*``) -> price; ``source`` names where it came from."""

    models: dict[str, ModelPrice] = field(default_factory=dict)
    batch_discount: float | None = None
    source: str = "built-in"

    def price(self, model: str | None) -> ModelPrice | None:
        """The model's price: its exact id, else the longest matching ``prefix*`` key, else None."""
        if model is None:
            return None
        if model in self.models and not model.endswith("*"):
            return self.models[model]
        hits = [k for k in self.models if k.endswith("*") and model.startswith(k[:-1])]
        return self.models[max(hits, key=len)] if hits else None

    def dollars(self, model: str | None, prompt: int, completion: int, reasoning: int | None = 0,
                batch: bool = False) -> float | None:
        """USD of calls that used these tokens (module doc); None when the model, or its batch rate, is unpriced."""
        price = self.price(model)
        if price is None:
            return None
        discount = 1.0
        if batch:
            discount = price.batch_discount if price.batch_discount is not None else self.batch_discount
            if discount is None:
                return None
        thinking = min(max(reasoning or 0, 0), completion)
        rate = price.output if price.reasoning is None else price.reasoning
        return (prompt * price.input + (completion - thinking) * price.output + thinking * rate) / PER_TOKENS * discount


BUILT_IN = PriceTable({"sim/*": ModelPrice(0.0, 0.0, batch_discount=1.0)}, None, "built-in (sim/* only)")


def load_prices(path: str | os.PathLike[str] | PriceTable | None = None) -> PriceTable:
    """The price table: ``path`` (or a table given as is), else ``$BEDSIDE_PRICES``, else ``BUILT_IN``."""
    if isinstance(path, PriceTable):
        return path
    chosen = path or os.environ.get(PRICES_ENV)
    if not chosen:
        return BUILT_IN
    source = Path(chosen)
    try:
        data = tomllib.loads(read_text(source, PRICE_FILE_LIMIT))
    except InputError as error:  # not a regular file (a FIFO, /dev/zero), too large, not UTF-8, missing
        raise PriceError(f"price table {source}: {error.message}") from None
    except tomllib.TOMLDecodeError as error:
        raise PriceError(f"price table {source}: invalid TOML: {error}") from None
    except RecursionError:  # tomllib recurses per nested array or inline table
        raise PriceError(f"price table {source}: invalid TOML: nested too deeply") from None
    return parse_prices(data, str(source))


def parse_prices(data: dict[str, Any], source: str = "price table") -> PriceTable:
    """A PriceTable from the TOML's parsed mapping; PriceError naming the field that is wrong."""
    unknown = sorted(set(data) - {"batch_discount", "models"})
    if unknown:
        raise PriceError(f"{source}: unknown key {unknown[0]!r} (expected batch_discount and [models.\"id\"])")
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise PriceError(f"{source}: models: must be a table of [models.\"model id\"] entries")
    out: dict[str, ModelPrice] = {}
    for key, entry in models.items():
        where = f"{source}: models.{key!r}"
        if not isinstance(entry, dict):
            raise PriceError(f"{where}: must be a table with input and output")
        extra = sorted(set(entry) - {"input", "output", "reasoning", "batch_discount"})
        if extra:
            raise PriceError(f"{where}: unknown key {extra[0]!r} (expected input, output, reasoning, batch_discount)")
        if "*" in key[:-1]:
            raise PriceError(f"{where}: '*' may only end a key (a prefix), not stand inside it")
        out[key] = ModelPrice(_rate(entry, "input", where, True), _rate(entry, "output", where, True),
                              _rate(entry, "reasoning", where, False), _discount(entry, where))
    return PriceTable(out, _discount(data, source), source)


def _rate(entry: dict[str, Any], name: str, where: str, required: bool) -> float | None:
    value = entry.get(name)
    if value is None:
        if required:
            raise PriceError(f"{where}: {name}: missing (USD per 1M tokens)")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise PriceError(f"{where}: {name}: {value!r} is not a non-negative number of USD per 1M tokens")
    if value > MAX_RATE:
        raise PriceError(f"{where}: {name}: {value!r} is above {MAX_RATE:,.0f} USD per 1M tokens (a dollar a token)")
    return float(value)


def _discount(entry: dict[str, Any], where: str) -> float | None:
    value = entry.get("batch_discount")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise PriceError(f"{where}: batch_discount: {value!r} is not a fraction in (0, 1] of the direct price")
    return float(value)


def cost_text(usd: float | None, tokens: int | None) -> str:
    """``$1.23`` (below a dollar ``$0.0123``: small runs are not all "$0.01") where the dollars are known, else
    ``1,234 tokens`` (never a guess), else ``unknown``."""
    if usd is not None:
        return f"${usd:,.2f}" if usd >= 1 or usd == 0 else f"${usd:.4f}"
    return "unknown" if tokens is None else f"{tokens:,} tokens"
