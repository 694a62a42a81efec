"""The shared-resample engine's fast paths against plain numpy: draws made in a helper thread and counted
case-major, percentiles a block of rows at a time in two threads. Same numbers, bit for bit."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import toolkit.analysis.paired as paired
from toolkit.analysis.paired import ResampleSettings, draw_resamples, percentile_interval


def _plain_counts(strata: list[tuple[str, int]], settings: ResampleSettings, chunk: int) -> list[np.ndarray]:
    """The counts straight from the definition: the same generator calls, counted one resample at a time."""
    rng = np.random.default_rng(settings.seed)
    out = []
    for _, n in strata:
        counts = np.zeros((n, settings.samples))
        rows = max(1, chunk // n)
        for first in range(0, settings.samples, rows):
            index = rng.integers(0, n, size=(min(settings.samples, first + rows) - first, n))
            for r, draws in enumerate(index):
                np.add.at(counts[:, first + r], draws, 1.0)
        out.append(counts)
    return out


@pytest.mark.parametrize("chunk", [1 << 22, 64, 5])
def test_counts_equal_the_plain_definition_whatever_the_chunking(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    monkeypatch.setattr(paired, "_DRAW_CHUNK", chunk)
    strata = [("a", 7), ("b", 3), ("c", 1), ("d", 12)]
    settings = ResampleSettings(301, 9)
    got = draw_resamples(strata, settings)
    for counts, plain in zip(got.counts, _plain_counts(strata, settings, chunk)):
        assert counts.dtype == np.float64 and counts.flags.c_contiguous
        assert np.array_equal(counts, plain)
    assert [s.stop - s.start for s in got.slices] == [7, 3, 1, 12]
    assert all((c.sum(axis=0) == c.shape[0]).all() for c in got.counts)  # each resample draws n cases


def test_a_failing_draw_is_raised_here_and_leaves_no_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    real = np.random.default_rng

    class Failing:
        def __init__(self, seed: int) -> None:
            self.rng, self.calls = real(seed), 0

        def integers(self, *args, **kwargs):
            self.calls += 1
            if self.calls == 3:
                raise MemoryError("no room for the indices")
            return self.rng.integers(*args, **kwargs)

    monkeypatch.setattr(paired, "_DRAW_CHUNK", 40)
    monkeypatch.setattr(paired.np.random, "default_rng", Failing)
    before = threading.active_count()
    with pytest.raises(MemoryError, match="no room"):
        draw_resamples([("a", 10), ("b", 10)], ResampleSettings(100, 1))
    assert threading.active_count() == before


def _numpy_interval(boot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if np.isnan(boot).any():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            lo, hi = np.nanpercentile(boot, [2.5, 97.5], axis=-1)
    else:
        lo, hi = np.percentile(boot, [2.5, 97.5], axis=-1)
    return lo, hi


@pytest.mark.parametrize("shape", [(1, 10), (7,), (97, 1000), (4, 33, 200), (65, 3)])
def test_percentile_interval_equals_numpy(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(len(shape) * 100 + shape[0])
    boot = np.round(rng.normal(size=shape), 2)  # ties, as resampled means of few cases have
    assert all(np.array_equal(a, b) for a, b in zip(percentile_interval(boot), _numpy_interval(boot)))
    if boot.ndim > 1 and boot.shape[0] > 2:
        flat = boot.reshape(-1, boot.shape[-1])
        flat[1, ::3] = np.nan  # some resamples without a value
        flat[-1, :] = np.nan  # a row without any
        got, want = percentile_interval(boot), _numpy_interval(boot)
        assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, want))
        assert np.isnan(got[0].reshape(-1)[-1])


def test_percentile_interval_of_a_strided_view_and_of_nothing() -> None:
    boot = np.random.default_rng(3).random((300, 80))
    view = boot.T  # not contiguous: rows are columns of the array
    assert all(np.array_equal(a, b) for a, b in zip(percentile_interval(view), _numpy_interval(view)))
    lo, hi = percentile_interval(np.zeros((3, 0)))
    assert lo.shape == hi.shape == (3,) and np.isnan(lo).all() and np.isnan(hi).all()
    lo, hi = percentile_interval(np.zeros((0, 5)))
    assert lo.shape == (0,)
