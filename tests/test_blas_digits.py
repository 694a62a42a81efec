"""The resampled sums behind every interval are the same bits whatever number of threads BLAS would use (a
machine's cores): multi-threaded products split large sums differently and moved an interval's last digit."""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits

from toolkit.analysis.paired import ResampleSettings, draw_resamples


def test_resampled_sums_are_the_same_bits_whatever_the_blas_threads() -> None:
    values = np.random.default_rng(3).random((990, 50))  # many rows: the shape where the split showed
    shared = draw_resamples([("b", 50)], ResampleSettings(samples=10_000, seed=42))
    with threadpool_limits(limits=1, user_api="blas"):
        one = shared.stratum_sums(values, 0)
    with threadpool_limits(limits=4, user_api="blas"):
        many = shared.stratum_sums(values, 0)
    assert np.array_equal(one, many)
