"""Shared-index bootstrap: one set of resample draws serves every run mean, rank and ratio statistic.

Every statistic the analyses report is a ratio of case sums within strata
(benchmarks): a benchmark mean is the sum of case scores over the number of
cases, a harm rate is the sum of events over the sum of opportunities. A
resample is therefore fully described by how often it drew each case, a count
vector per stratum. With the counts of all resamples as an (n_b x samples)
matrix, the resampled sums of any number of runs or pairs are one matrix
product of the (k x n_b) case values with it, never a loop over resamples or
pairs. Results are laid out (k x samples), one contiguous row per run or pair.

The counts come from an index tensor per stratum drawn with numpy's seeded
Generator (strata in the order given, each ``samples x n_b`` uniform indices),
so the same cases are drawn for both runs of a pair, for every pair and for the
rank distribution: differences are paired and one comparison's intervals are
mutually consistent.

Pairwise differences take their interval and p-value from a stratified paired t
(``toolkit.analysis.paired_t``), not from these resamples: at 25 cases per benchmark
the resampled distribution's normal tails and plug-in variance rejected too many
true nulls, and a t interval and its p-value agree by construction. For the same
reason ``compare``'s run intervals are the stratified t of the run's own scores.
The resamples serve the rank intervals and the ratio statistics (harms, item
rates).

Small strata: the percentile interval of a stratum mean of m cases reflects the
plug-in variance (divisor m), smaller than the unbiased estimate by (m - 1) / m,
and normal-like tails; below ~25 cases per benchmark percentile intervals
under-cover, which the commands say in a note (``small_sample_note``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from toolkit.analysis._blas import product
from toolkit.protocol import BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED, CI_HIGH, CI_LOW, check_samples, check_seed

_DRAW_CHUNK = 1 << 16  # indices drawn at once (512 KB): reused memory, where a large tensor is fresh pages each draw
_PERCENTILE_ROWS = 32  # rows percentile_interval puts in order at once (2.5 MB at 10,000 resamples)
TIE = 1e-12  # case differences (scores in [0, 1]) this close to 0 are ties
SMALL_STRATUM = 25  # fewer cases per benchmark than this: the small-sample note is printed


@dataclass(frozen=True)
class ResampleSettings:
    """How many resamples and the numpy Generator seed they come from."""

    samples: int = BOOTSTRAP_SAMPLES
    seed: int = BOOTSTRAP_SEED

    def __post_init__(self) -> None:
        object.__setattr__(self, "samples", check_samples(self.samples))  # numpy's integers stored as ints
        object.__setattr__(self, "seed", check_seed(self.seed))


@dataclass(frozen=True, eq=False)
class SharedResamples:
    """Draw counts of every resample, per stratum; the case axis is the strata laid end to end."""

    names: tuple[str, ...]
    slices: tuple[slice, ...]
    counts: tuple[np.ndarray, ...]  # per stratum: (n_b, samples) float64 draw counts, one column per resample

    @property
    def samples(self) -> int:
        return self.counts[0].shape[1] if self.counts else 0

    @property
    def width(self) -> int:
        return self.slices[-1].stop if self.slices else 0

    def per_stratum(self) -> Iterator["SharedResamples"]:
        """Each stratum as a SharedResamples of its own (as ``stream_resamples`` yields them)."""
        for part in zip(self.names, self.slices, self.counts):
            yield SharedResamples(*((x,) for x in part))

    def stratum_sums(self, values: np.ndarray, stratum: int) -> np.ndarray:
        """(k, samples): each resample's sum over the stratum's cases of every row of ``values`` (k, N)."""
        return product(np.ascontiguousarray(values[:, self.slices[stratum]]), self.counts[stratum])

    def stratum_ratio(self, num: np.ndarray, den: np.ndarray, stratum: int) -> np.ndarray:
        """(k, samples): resampled sum(num) / sum(den) within one stratum (NaN where sum(den) is 0)."""
        part = den[:, self.slices[stratum]]
        if part.size and (part == 1).all():
            # Every resample draws exactly n_b cases: a full denominator needs no product.
            bottom: np.ndarray | float = float(part.shape[1])
        else:
            bottom = self.stratum_sums(den, stratum)
        top = self.stratum_sums(num, stratum)
        with np.errstate(invalid="ignore", divide="ignore"):
            top /= bottom
        return top

    def pooled_ratio(self, num: np.ndarray, den: np.ndarray) -> np.ndarray:
        """(k, samples): resampled sum(num) / sum(den) over all strata (cases resampled within their stratum)."""
        top = np.zeros((num.shape[0], self.samples))
        bottom = np.zeros_like(top)
        for s in range(len(self.names)):
            top += self.stratum_sums(num, s)
            bottom += self.stratum_sums(den, s)
        with np.errstate(invalid="ignore", divide="ignore"):
            return top / bottom


def draw_resamples(strata: Sequence[tuple[str, int]], settings: ResampleSettings = ResampleSettings()
                   ) -> SharedResamples:
    """Resample counts for strata of the given sizes (in the given order), from one seeded Generator."""
    names, slices, counts = [], [], []
    for part in ResampleStream.of(strata, settings).per_stratum():
        names += part.names
        slices += part.slices
        counts += part.counts
    return SharedResamples(tuple(names), tuple(slices), tuple(counts))


@dataclass(frozen=True, eq=False)
class ResampleStream:
    """``draw_resamples``' counts drawn one stratum at a time as they are asked for: a reader that uses each
    stratum once holds one stratum's counts, not all of them. ``reuse``: every stratum's counts are drawn into
    one buffer, so a part is valid until the next one is drawn (fresh pages for each stratum otherwise)."""

    strata: tuple[tuple[str, int], ...]
    settings: ResampleSettings
    reuse: bool = False

    @classmethod
    def of(cls, strata: Sequence[tuple[str, int]], settings: ResampleSettings = ResampleSettings(),
           reuse: bool = False) -> "ResampleStream":
        for name, size in strata:
            if size < 1:
                raise ValueError(f"stratum {name!r} has no cases")
        return cls(tuple(strata), settings, reuse)

    @property
    def samples(self) -> int:
        return self.settings.samples

    def per_stratum(self) -> Iterator[SharedResamples]:
        """Each stratum's counts as a SharedResamples of that stratum alone (its slice of the whole case axis).

        The draws are taken in a fixed order of (stratum, chunk of resamples) calls, which fixes the numbers;
        each chunk is counted before the next is drawn, so one index chunk is held at a time."""
        for part, _ in self.per_stratum_own(()):
            yield part

    def per_stratum_own(self, own: Sequence[Sequence[np.ndarray]]
                        ) -> Iterator[tuple[SharedResamples, list[np.ndarray]]]:
        """``per_stratum``'s parts (the same draws), each with the own-case counts of ``own[stratum]``: per
        subset (a boolean mask of the stratum's cases, at least one case), (k, samples) counts of k = its
        size draws from it alone.

        A subset's k draws are the resample's first k draws that land in it (in draw order, so iid uniform on
        it), topped up from a second seeded generator when fewer land there: an exact bootstrap of its own k
        cases that shares most draws with the whole stratum's, and is never empty."""
        rng = np.random.default_rng(self.settings.seed)
        top_up = np.random.default_rng([self.settings.seed, 1])
        samples, start = self.samples, 0
        most = max((n for _, n in self.strata), default=0)
        buffer = np.empty((most, samples)) if self.reuse else None
        for s, (name, n) in enumerate(self.strata):
            rows = max(1, _DRAW_CHUNK // n)
            counts = buffer[:n] if buffer is not None else np.empty((n, samples))
            masks = [np.asarray(m, dtype=bool) for m in own[s]] if s < len(own) else []
            mine = [np.empty((int(m.sum()), samples)) for m in masks]
            for first in range(0, samples, rows):
                last = min(samples, first + rows)
                index = rng.integers(0, n, size=(last - first, n))
                for mask, out in zip(masks, mine):
                    out[:, first:last] = _own_counts(index, mask, top_up)
                counts[:, first:last] = _counts(index)
            yield SharedResamples((name,), (slice(start, start + n),), (counts,)), mine
            start += n


def _own_counts(index: np.ndarray, mask: np.ndarray, top_up: np.random.Generator) -> np.ndarray:
    """(k, rows) counts of k draws from the k cases of ``mask`` per resample (row of ``index``): the row's
    first k draws inside the mask, then draws of ``top_up`` for the rest."""
    rows, k = index.shape[0], int(mask.sum())
    inside = mask[index]
    taken = inside & (np.cumsum(inside, axis=1) <= k)
    position = np.cumsum(mask) - 1  # a case's place among the subset's cases
    missing = k - taken.sum(axis=1)
    extra = np.arange(k)[None, :] < missing[:, None]
    at = np.broadcast_to(np.arange(rows)[:, None], index.shape)
    drawn = np.concatenate([position[index[taken]], top_up.integers(0, k, size=(rows, k))[extra]])
    row = np.concatenate([at[taken], np.broadcast_to(np.arange(rows)[:, None], (rows, k))[extra]])
    return np.bincount(drawn * rows + row, minlength=k * rows).reshape(k, rows).astype(np.float64)


def _counts(index: np.ndarray) -> np.ndarray:
    """(n, rows) draw counts of each case in each resample, from (rows, n) uniform indices, in one bincount:
    resample r's draws of case i land in bin i * rows + r, so the counts come out case-major."""
    rows, n = index.shape
    index *= rows  # in place: the index tensor is the largest array of a draw
    index += np.arange(rows)[:, None]
    return np.bincount(index.ravel(), minlength=n * rows).reshape(n, rows)


def percentile_interval(boot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of (..., samples): the CI_LOW and CI_HIGH percentiles (linear), ignoring NaN resamples.

    numpy's percentile, a block of rows at a time, each copied into one reused buffer that the partition
    may overwrite (numpy's percentile would copy the whole input at once). Blocks with a NaN go through
    nanpercentile afterwards."""
    boot = np.asarray(boot, dtype=np.float64)
    shape, samples = boot.shape[:-1], boot.shape[-1]
    if samples == 0:
        nan = np.full(shape, np.nan)
        return nan, nan.copy()
    rows = boot.reshape(-1, samples)
    count = rows.shape[0]
    q = [100 * CI_LOW, 100 * CI_HIGH]
    lo, hi = np.empty(count), np.empty(count)
    starts = list(range(0, count, _PERCENTILE_ROWS))
    with_nan: list[int] = []

    buffer = np.empty((min(_PERCENTILE_ROWS, count), samples))
    for start in starts:
        stop = min(start + _PERCENTILE_ROWS, count)
        block = buffer[:stop - start]
        np.copyto(block, rows[start:stop])
        if np.isnan(block).any():
            with_nan.append(start)
            continue
        lo[start:stop], hi[start:stop] = np.percentile(block, q, axis=-1, overwrite_input=True)
    for start in with_nan:
        stop = min(start + _PERCENTILE_ROWS, count)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows stay NaN by design
            lo[start:stop], hi[start:stop] = np.nanpercentile(rows[start:stop], q, axis=-1)
    if not shape:  # one row: numbers, as numpy's percentile gives (0-d arrays are neither JSON nor polars values)
        return lo[0], hi[0]
    return lo.reshape(shape), hi.reshape(shape)


def small_sample_note(smallest: int | None, paired: bool = True, bootstrap: bool = False) -> list[str]:
    """The note the commands print when some benchmark has fewer than SMALL_STRATUM (common) cases.

    ``paired``: the output has run and pairwise t intervals; ``bootstrap``: it has percentile intervals
    (always when not ``paired``). Coverage figures: tests/test_calibration_coverage.py."""
    if smallest is None or smallest >= SMALL_STRATUM:
        return []
    parts = []
    if bootstrap or not paired:
        parts.append(f"bootstrap intervals are optimistic below ~{SMALL_STRATUM} cases per benchmark (smallest "
                     f"here: {smallest}): percentile intervals under-cover there")
    if paired:
        parts.append(f"few cases per benchmark (smallest here: {smallest}): overall run and pair intervals "
                     "(stratified t) hold at that size, but one benchmark's own run interval under-covers below ~25 "
                     "cases (94% at 10 and at 3 cases, its worst benchmark 91% and 83%), and at 3 cases about one "
                     "benchmark in ten has no spread between cases, so no interval")
    if smallest < 2:
        parts.append("a benchmark with a single case has no spread to estimate: no interval rests on it (see ci_note)")
    return ["; ".join(parts)]
