"""Bootstrap intervals of the reference runner, reproduced bit for bit and vectorised.

The reference summarises scores in pure Python with one ``random.Random(seed)``:
first, per benchmark in sorted name order, ``samples`` resample means
(``sum(values[rng.randrange(n)] for _ in range(n)) / n``) and their 2.5/97.5
percentiles; then, continuing the same generator, ``samples`` stratified
resamples whose statistic is ``statistics.fmean`` of the per-benchmark means.

Reproduced here without calling ``randrange`` millions of times:

* ``randrange(n)`` (n < 2**32) reads one 32-bit MT19937 output ``u`` per try and
  keeps ``u >> (32 - k)`` with ``k = n.bit_length()``, retrying while that is
  ``>= n``. Equivalently a try is accepted iff ``u < n << (32 - k)``, a threshold
  on the raw output, so acceptance is a vectorised comparison. NumPy's MT19937,
  loaded with ``random.Random(seed).getstate()``, yields the same raw outputs.
* Sums are rebuilt column by column in the reference's left-to-right order with
  the summation of the interpreter whose numbers are to be matched (plain
  addition up to CPython 3.11, Neumaier-compensated from 3.12).
* Resample indices depend only on the benchmark sizes (in sorted name order),
  ``samples`` and ``seed``, so they are cached: runs of one dataset share them.
"""

from __future__ import annotations

import math
import random
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Final, Literal, Mapping, Sequence

import numpy as np

from toolkit.protocol import BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED, CI_HIGH, CI_LOW

Summation = Literal["sequential", "compensated"]
SUMMATIONS: Final = ("sequential", "compensated")

# CPython 3.12 made float sum() Neumaier-compensated; default to whatever the running
# interpreter's sum() does so a reference run under it is matched out of the box.
DEFAULT_SUMMATION: Final[Summation] = "sequential" if sys.version_info < (3, 12) else "compensated"

_MAX_SIZE: Final = 2**32 - 1  # beyond this randrange reads more than one 32-bit word per try
_CHUNK: Final = 1 << 22  # raw outputs a scan examines at once: bounds memory (~60 MB peak)
_SEGMENT_CHUNK: Final = 1 << 20  # smaller: block jumps keep a position array per threshold
_CACHE_ENTRIES: Final = 4  # an entry holds 2 x samples x cases indices: 20 MB at 10k x 500 (uint16)


@dataclass(frozen=True)
class BootstrapSettings:
    """How to resample: count, generator seed, and which ``sum()`` to imitate."""

    samples: int = BOOTSTRAP_SAMPLES
    seed: int = BOOTSTRAP_SEED
    summation: Summation = DEFAULT_SUMMATION

    def __post_init__(self) -> None:
        if isinstance(self.samples, bool) or not isinstance(self.samples, int) or self.samples < 0:
            raise ValueError(f"samples must be an int >= 0, got {self.samples!r}")
        # An int seed only: None would seed from the OS and break the index cache.
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"seed must be an int, got {self.seed!r}")
        if self.summation not in SUMMATIONS:
            raise ValueError(f"summation must be one of {SUMMATIONS}, got {self.summation!r}")


@dataclass(frozen=True)
class Intervals:
    """Percentile bootstrap intervals (CI_LOW, CI_HIGH): per benchmark, and over benchmarks."""

    benchmarks: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    overall: tuple[float, float] = (math.nan, math.nan)


class MT19937Stream:
    """The 32-bit outputs of ``random.Random(seed)``, read in vectorised chunks.

    Outputs are generated into a buffer; ``peek`` looks ahead without consuming,
    ``advance`` consumes. Consumers peek more than they need and advance only past
    what they used, so the leftover outputs go to the next consumer in order.
    """

    def __init__(self, seed: int) -> None:
        _version, internal, _gauss = random.Random(seed).getstate()
        self._bitgen = np.random.MT19937()
        self._bitgen.state = {
            "bit_generator": "MT19937",
            "state": {"key": np.array(internal[:-1], dtype=np.uint32), "pos": internal[-1]},
        }
        self._buffer = np.empty(0, dtype=np.uint32)
        self._pos = 0

    def peek(self, count: int) -> np.ndarray:
        """The next ``count`` outputs (uint32), not consumed."""
        available = self._buffer.size - self._pos
        if available < count:
            fresh = self._bitgen.random_raw(count - available).astype(np.uint32)
            self._buffer = np.concatenate([self._buffer[self._pos:], fresh])
            self._pos = 0
        return self._buffer[self._pos:self._pos + count]

    def advance(self, count: int) -> None:
        """Consume ``count`` outputs (which must have been peeked)."""
        if count < 0 or self._pos + count > self._buffer.size:
            raise ValueError(f"cannot advance {count} outputs: {self._buffer.size - self._pos} buffered")
        self._pos += count

    def take(self, count: int) -> np.ndarray:
        """The next ``count`` outputs, consumed."""
        out = self.peek(count).copy()
        self.advance(count)
        return out


def _block_thresholds(sizes: Sequence[int]) -> tuple[list[int], list[int]]:
    """Per size n: the raw-output threshold ``n << (32 - k)`` of an accepted try, and the shift ``32 - k``."""
    shifts = [32 - n.bit_length() for n in sizes]
    return [n << s for n, s in zip(sizes, shifts)], shifts


def _draw_scan(stream: MT19937Stream, sizes: tuple[int, ...], samples: int) -> np.ndarray:
    """Draws by classifying every output once; only ambiguous outputs are resolved in a loop.

    Outputs below every block's threshold are accepted whatever draw they serve,
    those at or above every threshold rejected. An ambiguous output's fate depends
    on the draw it would serve, found in order by a Python loop: none for equal
    sizes, few when the sizes are close (49 vs 50: 1 output in 64).
    """
    block_thr, block_shift = _block_thresholds(sizes)
    period = np.repeat(np.arange(len(sizes)), sizes)  # block of each draw in a resample
    thr_list = np.array(block_thr, dtype=np.uint32)[period].tolist()
    shift_period = np.array(block_shift, dtype=np.uint32)[period]
    length, total = len(thr_list), samples * len(thr_list)
    lo, hi = min(block_thr), max(block_thr)
    cost = sum(1 << (32 - s) for s in block_shift) / length  # expected tries per draw
    out = np.empty(total, dtype=_index_dtype(sizes))
    filled = 0
    while filled < total:
        remaining = total - filled
        raw = stream.peek(min(_CHUNK, int(remaining * cost * 1.01) + 256))
        sure = raw < lo
        if lo == hi:
            accepted = sure
        else:
            ambiguous_pos = np.flatnonzero((raw >= lo) & (raw < hi))
            # Draw an ambiguous output would serve = draws filled before this chunk
            # + sure acceptances before it + ambiguous acceptances before it (``extra``).
            base = (filled + np.cumsum(sure)[ambiguous_pos]).tolist()
            taken: list[int] = []
            extra = 0
            for j, (b, u) in enumerate(zip(base, raw[ambiguous_pos].tolist())):
                d = b + extra
                if d >= total:
                    break
                if u < thr_list[d % length]:
                    taken.append(j)
                    extra += 1
            accepted = sure.copy()
            accepted[ambiguous_pos[taken]] = True
        positions = np.flatnonzero(accepted)[:remaining]
        used = positions.size
        if len(set(block_shift)) == 1:
            shifts: np.ndarray | int = block_shift[0]
        else:  # the period's shift pattern from the draw reached (1, 2, 4.. share a threshold, not k)
            shifts = np.resize(np.roll(shift_period, -(filled % length)), used)
        out[filled:filled + used] = raw[positions] >> shifts
        filled += used
        # Finished: consume up to the last output used. Otherwise all were examined.
        stream.advance(int(positions[-1]) + 1 if filled == total and used else raw.size)
    return out.reshape(samples, length)


def _draw_segments(stream: MT19937Stream, sizes: tuple[int, ...], samples: int) -> np.ndarray:
    """Draws by jumping from block to block: one Python step per (resample, benchmark).

    Within a block every try faces the same threshold, so the block ends at the
    n-th output below it: a search in that threshold's sorted accepted positions.
    Cost does not depend on how far apart the thresholds are (sizes of different k).
    """
    block_thr, block_shift = _block_thresholds(sizes)
    distinct = sorted(set(block_thr))
    which = [distinct.index(t) for t in block_thr]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    count = len(sizes)
    table = np.empty((samples, offsets[-1]), dtype=_index_dtype(sizes))
    total, done = samples * count, 0
    chunk = _SEGMENT_CHUNK
    while done < total:
        raw = stream.peek(chunk)
        accepted = [np.flatnonzero(raw < t) for t in distinct]
        rows: list[list[int]] = [[] for _ in sizes]
        starts: list[list[int]] = [[] for _ in sizes]
        p, first = 0, done
        while done < total:
            r, b = divmod(done, count)
            pos = accepted[which[b]]
            j = int(pos.searchsorted(p))
            last = j + sizes[b] - 1
            if last >= pos.size:  # block not complete in this chunk: resume from its start
                break
            rows[b].append(r)
            starts[b].append(j)
            p = int(pos[last]) + 1
            done += 1
        if done == first:  # not even one block fits: look further ahead
            chunk *= 2
            continue
        for b, n in enumerate(sizes):
            if rows[b]:
                picks = accepted[which[b]][np.array(starts[b])[:, None] + np.arange(n)]
                table[rows[b], offsets[b]:offsets[b + 1]] = raw[picks] >> np.uint32(block_shift[b])
        stream.advance(p)
    return table


def _index_dtype(sizes: Sequence[int]) -> type[np.unsignedinteger]:
    # Indices are < n: 16 bits cover every realistic benchmark and halve the cache.
    return np.uint16 if max(sizes, default=1) <= 2**16 else np.uint32


def _draw(stream: MT19937Stream, sizes: tuple[int, ...], samples: int, method: str = "auto") -> np.ndarray:
    """A (samples, sum(sizes)) table: per resample, ``sizes[0]`` draws of ``randrange(sizes[0])``, then the next...

    Consumes exactly the outputs the reference consumes. ``method`` (scan, segments)
    is for tests; auto scans when few outputs are ambiguous, else jumps blocks.
    """
    if samples == 0 or not sizes:
        return np.empty((samples, sum(sizes)), dtype=_index_dtype(sizes))
    if method == "auto":
        block_thr, block_shift = _block_thresholds(sizes)
        tries = sum(1 << (32 - s) for s in block_shift)  # expected outputs per resample
        ambiguous = tries * (max(block_thr) - min(block_thr)) / 2**32
        # A loop step per ambiguous output vs ~3 steps' worth per block.
        method = "scan" if ambiguous <= 3 * len(sizes) else "segments"
    if method == "scan":
        return _draw_scan(stream, sizes, samples)
    if method == "segments":
        return _draw_segments(stream, sizes, samples)
    raise ValueError(f"unknown draw method {method!r}")


@lru_cache(maxsize=_CACHE_ENTRIES)
def _cached_indices(sizes: tuple[int, ...], samples: int, seed: int
                    ) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """Index matrices as read-only (n, samples) arrays: row j holds the j-th draw of every resample.

    Stored transposed so the column-by-column sums read contiguous rows.
    """
    stream = MT19937Stream(seed)
    per_benchmark = [np.ascontiguousarray(_draw(stream, (n,), samples).T) for n in sizes]
    table = _draw(stream, sizes, samples)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    overall = [np.ascontiguousarray(table[:, offsets[b]:offsets[b + 1]].T) for b in range(len(sizes))]
    for array in (*per_benchmark, *overall):
        array.setflags(write=False)  # shared through the cache
    return tuple(per_benchmark), tuple(overall)


def _check_sizes(sizes: Sequence[int]) -> tuple[int, ...]:
    checked = tuple(int(n) for n in sizes)
    for n in checked:
        if not 1 <= n <= _MAX_SIZE:
            # The reference divides by n (n = 0 raises) and reads one word per try only below 2**32.
            raise ValueError(f"benchmark sizes must be in [1, {_MAX_SIZE}], got {n}")
    return checked


def reference_indices(sizes: Sequence[int], settings: BootstrapSettings = BootstrapSettings()
                      ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The reference's resample indices for benchmarks of these sizes, in sorted name order.

    Returns (per-benchmark, overall): for each benchmark a read-only (samples, n)
    integer array; row s lists the value positions of resample s, in draw order.
    The first list serves the per-benchmark intervals, the second the stratified
    overall interval. ``settings.summation`` plays no part.
    """
    per_benchmark, overall = _cached_indices(_check_sizes(sizes), settings.samples, settings.seed)
    return [a.T for a in per_benchmark], [a.T for a in overall]


def resample_means(values: Sequence[float] | np.ndarray, indices: np.ndarray,
                   summation: Summation = DEFAULT_SUMMATION) -> np.ndarray:
    """``sum(values[i] for i in row) / n`` for every row of a (samples, n) index array, as CPython computes it."""
    vals = np.asarray(values, dtype=np.float64)
    idx = np.asarray(indices)
    if idx.ndim != 2 or idx.shape[1] == 0:
        raise ValueError(f"indices must be a (samples, n) array with n >= 1, got shape {idx.shape}")
    samples, n = idx.shape
    # Column j of every resample at once: a gather on the transposed indices gives rows.
    columns = vals[idx.T]
    # CPython starts at int 0; its first float is 0 + x (turns -0.0 into 0.0), then adds.
    total = np.zeros(samples)
    if summation == "sequential":
        for column in columns:
            total += column
    elif summation == "compensated":
        total = total + columns[0]
        comp = np.zeros(samples)
        for column in columns[1:]:
            # CPython 3.12 builtin sum(), float path: Neumaier's improved Kahan-Babuska.
            t = total + column
            comp += np.where(np.abs(total) >= np.abs(column), (total - t) + column, (column - t) + total)
            total = t
        # Compensation is added only when nonzero and finite (keeps inf sums and -0.0).
        fix = (comp != 0) & np.isfinite(comp)
        total = np.where(fix, total + comp, total)
    else:
        raise ValueError(f"summation must be one of {SUMMATIONS}, got {summation!r}")
    return total / n


def percentile_reference(values: Sequence[float] | np.ndarray, p: float) -> float:
    """The reference's percentile: linear interpolation written as ``o[lo]*(1-f) + o[hi]*f``.

    Not numpy's formula, whose rounding differs in the last bit. ``values`` need not
    be sorted; NaN is not supported (Python's ``sorted`` has no defined order for it).
    """
    # Stable, like sorted(): equal values (0.0 and -0.0) keep their input order.
    ordered = np.sort(np.asarray(values, dtype=np.float64).ravel(), kind="stable")
    if ordered.size == 0:
        return math.nan
    pos = (ordered.size - 1) * p
    lo, hi = math.floor(pos), math.ceil(pos)
    if lo == hi:
        return float(ordered[lo])
    f = pos - lo
    return float(ordered[lo]) * (1 - f) + float(ordered[hi]) * f


def _interval(values: np.ndarray | list[float]) -> tuple[float, float]:
    return percentile_reference(values, CI_LOW), percentile_reference(values, CI_HIGH)


def reference_intervals(values_by_benchmark: Mapping[str, Sequence[float] | np.ndarray],
                        settings: BootstrapSettings = BootstrapSettings()) -> Intervals:
    """The reference runner's bootstrap intervals, bit for bit.

    Benchmarks are taken in sorted name order. The order of the values within a
    benchmark is the caller's: the reference resamples positions, so completion
    order and dataset order give different intervals. Values are converted to
    float64 (the reference's scores are floats). Raises ValueError for an empty
    benchmark (the reference divides by zero); no benchmarks give NaN overall.
    """
    names = sorted(values_by_benchmark)
    arrays = [np.asarray(values_by_benchmark[name], dtype=np.float64) for name in names]
    for name, array in zip(names, arrays):
        if array.ndim != 1:
            raise ValueError(f"benchmark {name!r}: values must be one-dimensional, got shape {array.shape}")
    sizes = [array.size for array in arrays]
    if not names:
        return Intervals({}, (math.nan, math.nan))
    per_benchmark, overall = reference_indices(sizes, settings)
    benchmarks = {
        name: _interval(resample_means(array, idx, settings.summation))
        for name, array, idx in zip(names, arrays, per_benchmark)
    }
    # fmean(ms) = fsum(ms) / len(ms) per resample; math.fsum is exact, 10k rows is cheap.
    means = np.stack([resample_means(array, idx, settings.summation) for array, idx in zip(arrays, overall)], axis=1)
    count = len(names)
    boot = [math.fsum(row) / count for row in means.tolist()]
    return Intervals(benchmarks, _interval(boot))
