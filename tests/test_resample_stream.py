"""Resamples drawn one stratum at a time (``ResampleStream``) are the shared resamples, draw for draw."""

from __future__ import annotations

import numpy as np
import pytest

from toolkit.analysis import paired
from toolkit.analysis.case_comparison import resample_units
from toolkit.analysis.matrix import CaseMatrix
from toolkit.analysis.paired import ResampleSettings, ResampleStream, draw_resamples

STRATA = [("a", 7), ("b", 50), ("c", 1), ("d", 333)]


def test_the_stream_draws_what_draw_resamples_draws_whatever_the_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = ResampleSettings(samples=501, seed=3)
    whole = draw_resamples(STRATA, settings)
    for chunk in (1 << 22, 1000, 7):  # chunks of resamples drawn at once: the generator's calls in one order
        monkeypatch.setattr(paired, "_DRAW_CHUNK", chunk)
        for reuse in (False, True):
            parts = [(p.names, p.slices, p.counts[0].copy()) for p in
                     ResampleStream.of(STRATA, settings, reuse=reuse).per_stratum()]
            assert [p[0][0] for p in parts] == list(whole.names)
            assert [p[1][0] for p in parts] == list(whole.slices)
            for (_, _, counts), want in zip(parts, whole.counts):
                np.testing.assert_array_equal(counts, want)
        assert all(np.array_equal(x, y) for x, y in zip(draw_resamples(STRATA, settings).counts, whole.counts))


def test_unit_resamples_from_the_stream_equal_those_from_shared_resamples() -> None:
    rng = np.random.default_rng(0)
    width = sum(n for _, n in STRATA)
    scores = rng.random((4, width))
    present = (rng.random((4, width)) > 0.1).astype(float)
    present[:, 7:57] = 1.0
    bounds = np.cumsum([0] + [n for _, n in STRATA])
    matrix = CaseMatrix(("u1", "u2", "u3", "u4"), tuple(b for b, _ in STRATA),
                        tuple(slice(a, b) for a, b in zip(bounds, bounds[1:])), tuple(map(str, range(width))),
                        scores * present, present)
    settings = ResampleSettings(samples=300, seed=9)
    want = resample_units(matrix, draw_resamples(STRATA, settings))
    for reuse in (False, True):
        got = resample_units(matrix, ResampleStream.of(STRATA, settings, reuse=reuse))
        np.testing.assert_array_equal(got.overall, want.overall)
        np.testing.assert_array_equal(got.benchmark, want.benchmark)
    with pytest.raises(ValueError, match="no cases"):
        ResampleStream.of([("x", 0)], settings)


def test_own_case_draws_are_a_whole_bootstrap_of_the_subset_beside_the_same_shared_draws() -> None:
    """per_stratum_own yields per_stratum's counts unchanged, and for each subset k draws of its own cases in
    every resample (uniform over them), mostly the shared draws that landed there."""
    settings = ResampleSettings(3000, 11)
    strata = [("a", 5), ("b", 3)]
    mask = [np.array([True, False, True, True, False]), np.array([False, True, True])]
    plain = list(ResampleStream.of(strata, settings).per_stratum())
    both = list(ResampleStream.of(strata, settings).per_stratum_own([[mask[0]], [mask[1]]]))
    for p, (q, (own,)), m in zip(plain, both, mask):
        assert np.array_equal(p.counts[0], q.counts[0])
        k = int(m.sum())
        assert own.shape == (k, 3000) and (own.sum(axis=0) == k).all()
        assert abs(own.mean(axis=1) - 1).max() < 0.06  # each own case drawn once per resample on average
        shared = np.minimum(own, q.counts[0][m]).sum(axis=0)
        assert shared.mean() > 0.5 * k  # coupled to the shared draws, not an independent bootstrap
