"""The reference's ``random.Random(seed).randrange(n)`` draws, reproduced from raw MT19937 outputs.

``randrange(n)`` (n < 2**32) reads one 32-bit output ``u`` per try and keeps
``u >> (32 - k)``, ``k = n.bit_length()``, retrying while that is ``>= n``; NumPy's
MT19937 loaded with ``random.Random(seed).getstate()`` yields the same outputs.
A seed's outputs are generated once, in pieces kept in a bounded cache together
with what is derived from them (per piece, the positions a size accepts), so a
benchmark's draws are a slice; the stratified pass, which mixes sizes, decides
only the outputs whose fate depends on the draw they serve, in one tight loop.
Used by ``toolkit.bootstrap._reference``.
"""

from __future__ import annotations

import random
import threading
from functools import lru_cache
from typing import Callable, Final, Sequence

import numpy as np

from toolkit.bootstrap import _cache as index_cache

_MAX_SIZE: Final = 2**32 - 1  # beyond this randrange reads more than one 32-bit word per try
_PIECE: Final = 1 << 20  # outputs per cached piece of a seed's stream (4 MB)
_STEP: Final = 1 << 10  # accepted counts are kept every _STEP outputs: position <-> rank in O(_STEP)
_SCAN_SPREAD: Final = 16  # scan when max - min size <= this: it decides len(sizes) * spread tries
_TABLE_BYTES: Final = 4 << 20  # bound on the scan's lookup table (spread x outputs per pass)
_SEGMENT_CHUNK: Final = 1 << 20  # outputs a block-jumping pass looks at
_CACHE_BYTES: Final = 192 << 20  # stream pieces and what is derived; ~125 MB for 10k x 500 cases
_CACHE_ENTRIES: Final = 4  # index sets of distinct size tuples (5-10 MB each at 10k x 500 cases)
_LOCK: Final = threading.RLock()  # guards the caches (each seed's generator has a lock of its own)


_CACHE: Final = index_cache.MemoryCache(_CACHE_BYTES, _LOCK)


class _SeedOutputs:
    """The raw outputs of one seed, by piece. The generator state at each piece boundary is
    kept (2.5 KB), so a piece evicted from the cache is regenerated alone."""

    def __init__(self, seed: int) -> None:
        _version, internal, _gauss = random.Random(seed).getstate()
        self.seed = seed
        self._bitgen = np.random.MT19937()
        self._states = [(np.array(internal[:-1], dtype=np.uint32), internal[-1])]
        self._generating = threading.Lock()  # one generator: one thread at a time moves it

    def piece(self, index: int) -> np.ndarray:
        return _CACHE.get(("raw", self.seed, index), lambda: (self._generate(index),))[0]

    def _generate(self, index: int) -> np.ndarray:
        with self._generating:
            return self._generate_locked(index)

    def _generate_locked(self, index: int) -> np.ndarray:
        for i in range(min(index, len(self._states) - 1), index + 1):
            key, pos = self._states[i]
            self._bitgen.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": pos}}
            raw = np.empty(_PIECE, dtype=np.uint32)
            for at in range(0, _PIECE, 1 << 16):  # in small uint64 batches: no 8 MB temporary
                raw[at:at + (1 << 16)] = self._bitgen.random_raw(min(1 << 16, _PIECE - at))
            if i + 1 == len(self._states):
                state = self._bitgen.state["state"]
                self._states.append((state["key"].copy(), state["pos"]))
            if i < index:  # generated on the way: keep it too
                _CACHE.put(("raw", self.seed, i), (raw,))
        return raw

    def read(self, start: int, count: int) -> np.ndarray:
        """Outputs ``start .. start + count - 1`` (uint32, read-only when inside one piece)."""
        first, offset = divmod(start, _PIECE)
        if offset + count <= _PIECE:
            return self.piece(first)[offset:offset + count]
        last, stop = divmod(start + count, _PIECE)
        parts = [self.piece(first)[offset:], *(self.piece(i) for i in range(first + 1, last))]
        return np.concatenate([*parts, self.piece(last)[:stop]] if stop else parts)


@lru_cache(maxsize=8)
def _outputs(seed: int) -> _SeedOutputs:
    return _SeedOutputs(seed)


class MT19937Stream:
    """The 32-bit outputs of ``random.Random(seed)``, read in vectorised chunks.

    ``peek`` looks ahead without consuming, ``advance`` consumes. Consumers peek
    more than they need and advance only past what they used, so the leftover
    outputs go to the next consumer in order. Outputs come from a per-seed cache
    shared by all streams of that seed.
    """

    def __init__(self, seed: int) -> None:
        self._outputs = _outputs(seed)
        self.position = 0  # outputs consumed
        self._seen = 0  # outputs peeked at (absolute): the limit of advance

    def peek(self, count: int) -> np.ndarray:
        """The next ``count`` outputs (uint32), not consumed."""
        self._seen = max(self._seen, self.position + count)
        return self._outputs.read(self.position, count)

    def advance(self, count: int) -> None:
        """Consume ``count`` outputs (which must have been peeked)."""
        if count < 0 or self.position + count > self._seen:
            raise ValueError(f"cannot advance {count} outputs: {self._seen - self.position} peeked")
        self.position += count

    def take(self, count: int) -> np.ndarray:
        """The next ``count`` outputs, consumed."""
        out = self.peek(count).copy()
        self.advance(count)
        return out

    def _consumed_to(self, position: int) -> None:
        self.position = position
        self._seen = max(self._seen, position)


def _shift(n: int) -> int:
    return 32 - n.bit_length()


def _index_dtype(sizes: Sequence[int]) -> type[np.unsignedinteger]:
    # Indices are < 2**k: the narrowest type that holds them keeps caches small.
    bits = max(sizes, default=1).bit_length()
    return np.uint8 if bits <= 8 else np.uint16 if bits <= 16 else np.uint32


def _tries(outputs: _SeedOutputs, bits: int, index: int) -> np.ndarray:
    """Piece ``index`` as the indices that tries of ``randrange(n)``, ``n.bit_length() == bits``, read."""
    def make() -> tuple[np.ndarray, ...]:
        return ((outputs.piece(index) >> (32 - bits)).astype(_index_dtype([(1 << bits) - 1])),)
    return _CACHE.get(("tries", outputs.seed, bits, index), make)[0]


def _accepted(outputs: _SeedOutputs, n: int, index: int) -> tuple[np.ndarray, ...]:
    """Of piece ``index``: the indices ``randrange(n)`` keeps, in order, and how many it keeps
    before every multiple of _STEP."""
    def make() -> tuple[np.ndarray, ...]:
        tries = _tries(outputs, n.bit_length(), index)
        kept = np.flatnonzero(tries < n)
        return tries[kept], np.searchsorted(kept, np.arange(0, _PIECE + 1, _STEP)).astype(np.int32)
    return _CACHE.get(("accepted", outputs.seed, n, index), make)


def _rank(outputs: _SeedOutputs, n: int, index: int, offset: int) -> int:
    """How many outputs of piece ``index`` before ``offset`` ``randrange(n)`` accepts."""
    block = offset // _STEP
    tail = _tries(outputs, n.bit_length(), index)[block * _STEP:offset]
    return int(_accepted(outputs, n, index)[1][block]) + int(np.count_nonzero(tail < n))


def _locate(outputs: _SeedOutputs, n: int, index: int, rank: int) -> int:
    """Offset in piece ``index`` of the output accepted ``rank``-th (from 0) there by ``randrange(n)``."""
    counts = _accepted(outputs, n, index)[1]
    block = int(np.searchsorted(counts, rank, side="right")) - 1
    tries = _tries(outputs, n.bit_length(), index)[block * _STEP:(block + 1) * _STEP]
    return block * _STEP + int(np.flatnonzero(tries < n)[rank - counts[block]])


def _take_accepted(outputs: _SeedOutputs, n: int, start: int, count: int) -> tuple[np.ndarray, int]:
    """The next ``count`` results of ``randrange(n)`` from output ``start``, and the output after the last used."""
    if count == 0:
        return np.empty(0, dtype=_index_dtype([n])), start
    index, offset = divmod(start, _PIECE)
    rank = _rank(outputs, n, index, offset)
    parts = []
    while True:
        values = _accepted(outputs, n, index)[0]
        if rank + count <= values.size:
            parts.append(values[rank:rank + count])
            end = index * _PIECE + _locate(outputs, n, index, rank + count - 1) + 1
            return (parts[0] if len(parts) == 1 else np.concatenate(parts)), end
        parts.append(values[rank:])
        count -= values.size - rank
        index, rank = index + 1, 0


def _between(outputs: _SeedOutputs, lo: int, hi: int, index: int) -> tuple[np.ndarray, ...]:
    """Of piece ``index``, tries with an index in [lo, hi) (lo, hi of one bit length): their offsets,
    index - lo, and how many tries before each have an index below lo."""
    def make() -> tuple[np.ndarray, ...]:
        tries = _tries(outputs, lo.bit_length(), index)
        offsets = np.flatnonzero((tries >= lo) & (tries < hi))
        sure_before = np.cumsum(tries < lo, dtype=np.int32)[offsets]
        return offsets.astype(np.int32), tries[offsets] - np.asarray(lo, dtype=tries.dtype), sure_before
    return _CACHE.get(("between", outputs.seed, lo, hi, index), make)


def _draw_scan(outputs: _SeedOutputs, sizes: tuple[int, ...], samples: int, start: int
               ) -> tuple[np.ndarray, int]:
    """Draws for sizes of one bit length from output ``start``, and the output after the last used.

    Outputs whose index is below ``min(sizes)`` are accepted by any draw ("sure"): they
    are the cached results of ``randrange(min)``. Those with an index at or above
    ``max(sizes)`` are rejected by all. The rest ("between": per resample, len(sizes)
    per unit of ``max - min``) are accepted or not depending on the draw d they would
    serve, d = sure outputs before them + hits among them before: a Python loop, one
    lookup each. Passes of ``span`` outputs bound the lookup table; per pass, the sure
    values and the hits are then merged into the draws in order.
    """
    lo, hi, length = min(sizes), max(sizes), sum(sizes)
    total, spread = samples * length, hi - lo
    if spread == 0:
        values, end = _take_accepted(outputs, lo, start, total)
        return values.reshape(samples, length), end
    per_draw = np.repeat(sizes, sizes)  # the size a draw of a resample is for
    span = _PIECE  # outputs per loop pass: a power of two, so passes tile pieces
    while span > _STEP and span * spread > _TABLE_BYTES:
        span //= 2
    # table[j * spread + c]: is index lo + c accepted by draw j (mod length)? Bytes, in draw
    # order (the loop reads it front to back), for j < base (< length) + sure + hits in a pass.
    pattern = (per_draw[:, None] > lo + np.arange(spread)).astype(np.uint8).tobytes()
    table = pattern * (span // length + 2)
    out = np.empty(total, dtype=_index_dtype(sizes))
    sure_slot = np.empty(span, dtype=bool)  # scratch: which draws of a pass take sure outputs
    done, position = 0, start  # draws made before the pass, and the output it starts at
    while True:
        index, offset = divmod(position, _PIECE)
        stop = (offset // span + 1) * span
        offsets, classes, sure_before = _between(outputs, lo, hi, index)
        first, last = np.searchsorted(offsets, (offset, stop)).tolist()
        sure_at = _rank(outputs, lo, index, offset)
        sure = sure_before[first:last] - sure_at
        last = first + int(np.searchsorted(sure, min(total - done, span)))  # at a draw >= total: past the end
        base = done % length
        keys = (sure[:last - first] + base).astype(np.int64) * spread + classes[first:last]
        extra = 0
        # The hot loop: the table key of a try is (base + sure + hits before) * spread + class.
        # (Iterating a memoryview makes the ints on the fly: cheaper than tolist.)
        hits = [key for key in memoryview(keys) if table[key + extra] and (extra := extra + spread)]
        keys = np.fromiter(hits, dtype=np.int64, count=len(hits)) + spread * np.arange(len(hits))
        draw, cls = np.divmod(keys, spread)
        draw -= base  # draws of the hits, counted from the pass's first
        count = int(np.searchsorted(draw, total - done))
        used = min(_rank(outputs, lo, index, stop) - sure_at, total - done - count)  # sure outputs taken
        width = used + count
        segment, slot = out[done:done + width], sure_slot[:width]
        slot.fill(True)
        slot[draw[:count]] = False
        segment[slot] = _accepted(outputs, lo, index)[0][sure_at:sure_at + used]
        segment[draw[:count]] = cls[:count] + lo
        if done + width == total:
            break
        done += width
        position = index * _PIECE + stop
    if not count or draw[count - 1] < width - 1:  # the last draw took a sure output
        return out.reshape(samples, length), index * _PIECE + _locate(outputs, lo, index, sure_at + used - 1) + 1
    # It took a between-output: replay from the last sure output of the pass (or its start).
    run = int(np.argmin(np.append(draw[count - 1::-1] == np.arange(width - 1, width - 1 - count, -1), False)))
    if used:
        position = index * _PIECE + _locate(outputs, lo, index, sure_at + used - 1) + 1
    return out.reshape(samples, length), _end_after_last_hit(
        outputs, per_draw.tolist(), done + width - run, total, position)


def _end_after_last_hit(outputs: _SeedOutputs, per_draw: list[int], draw: int, total: int, position: int) -> int:
    """Replays the reference from ``position``, where ``draw`` draws are made, until the last one."""
    shift = _shift(per_draw[0])
    while True:
        v = int(outputs.read(position, 1)[0]) >> shift
        position += 1
        if v < per_draw[draw % len(per_draw)]:
            draw += 1
            if draw == total:
                return position


def _draw_segments(stream: MT19937Stream, sizes: tuple[int, ...], samples: int) -> np.ndarray:
    """Draws by jumping from block to block: one Python step per (resample, benchmark).

    Within a block every try faces the same threshold, so the block ends at the
    n-th output below it: a search in that threshold's sorted accepted positions.
    Cost does not depend on how far apart the thresholds are (sizes of different k).
    """
    block_thr = [n << _shift(n) for n in sizes]
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
                table[rows[b], offsets[b]:offsets[b + 1]] = raw[picks] >> np.uint32(_shift(n))
        stream.advance(p)
    return table


def _draw(stream: MT19937Stream, sizes: tuple[int, ...], samples: int, method: str = "auto") -> np.ndarray:
    """A (samples, sum(sizes)) table: per resample, ``sizes[0]`` draws of ``randrange(sizes[0])``, then the next...

    Consumes exactly the outputs the reference consumes. ``method`` (scan, segments)
    is for tests; auto scans sizes of one bit length that are close, else jumps blocks.
    """
    if samples == 0 or not sizes:
        return np.empty((samples, sum(sizes)), dtype=_index_dtype(sizes))
    one_length = len({n.bit_length() for n in sizes}) == 1
    if method == "auto":
        # Per resample the scan decides len(sizes) * (max - min) outputs in a loop, segments make
        # len(sizes) steps costing ~50 decisions each; the scan's table also grows with the spread.
        method = "scan" if one_length and max(sizes) - min(sizes) <= _SCAN_SPREAD else "segments"
    if method == "scan":
        if not one_length:
            raise ValueError(f"the scan needs sizes of one bit length, got {sizes}")
        table, end = _draw_scan(stream._outputs, sizes, samples, stream.position)
        stream._consumed_to(end)
        return table
    if method == "segments":
        return _draw_segments(stream, sizes, samples)
    raise ValueError(f"unknown draw method {method!r}")


_MAKING: Final[dict[tuple, threading.Lock]] = {}  # a lock per index table asked for (a few per process)


def cached_indices(sizes: tuple[int, ...], samples: int, seed: int
                   ) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """``_indices``, made once when threads ask for the same table at once: summary's two threads start on runs
    of the same case counts, and the second made a copy of its own (twice the memory, and a core)."""
    with _LOCK:
        making = _MAKING.setdefault((sizes, samples, seed), threading.Lock())
    with making:
        return _indices(sizes, samples, seed)


@lru_cache(maxsize=_CACHE_ENTRIES)
def _indices(sizes: tuple[int, ...], samples: int, seed: int
             ) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """Read-only (samples, n) index arrays: per benchmark, then the stratified pass's blocks.

    Both passes are kept as one (2, sum(sizes), samples) table, each array a transposed
    view: a resample mean gathers column by column, so a column of draws is a contiguous
    row here. The table is read from the user's cache directory when a verified copy is
    there (toolkit.bootstrap._cache), else made and stored.
    """
    shape, dtype = (2, sum(sizes), samples), np.dtype(_index_dtype(sizes))
    worth_storing = samples * shape[1] >= index_cache.MIN_DRAWS
    key = index_cache.key_digest(__file__, seed, samples, sizes) if worth_storing else ""
    both = index_cache.load(key, shape, dtype) if worth_storing else None
    offsets = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    if both is None:
        stream = MT19937Stream(seed)
        both = np.empty(shape, dtype=dtype)
        for n, lo in zip(sizes, offsets):  # per benchmark, in order, then the stratified pass: the reference's order
            both[0, lo:lo + n] = _draw(stream, (n,), samples).T
        both[1] = _draw(stream, sizes, samples).T
        if worth_storing:
            index_cache.save(key, both)
    both.setflags(write=False)  # shared through the cache
    per_benchmark, overall = ([part[lo:hi].T for lo, hi in zip(offsets, offsets[1:])] for part in both)
    return tuple(per_benchmark), tuple(overall)


cached_indices.cache_clear = _indices.cache_clear  # type: ignore[attr-defined]
cached_indices.cache_info = _indices.cache_info  # type: ignore[attr-defined]


def check_sizes(sizes: Sequence[int]) -> tuple[int, ...]:
    checked = tuple(int(n) for n in sizes)
    for n in checked:
        if not 1 <= n <= _MAX_SIZE:
            # The reference divides by n (n = 0 raises) and reads one word per try only below 2**32.
            raise ValueError(f"benchmark sizes must be in [1, {_MAX_SIZE}], got {n}")
    return checked
