"""Bit-exact agreement of toolkit.bootstrap._reference with a plain re-implementation of the reference runner."""

from __future__ import annotations

import glob
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
from typing import Callable, Iterator, Sequence

import numpy as np
import pytest

from toolkit.bootstrap._reference import (
    DEFAULT_SUMMATION,
    BootstrapSettings,
    Intervals,
    MT19937Stream,
    _fmeans,
    _interval,
    percentile_reference,
    reference_indices,
    reference_intervals,
    resample_means,
)
from toolkit.bootstrap._draws import _draw, cached_indices as _cached_indices
from toolkit.protocol import BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED, CI_HIGH, CI_LOW

# --- the reference, written the obvious way (kept free of numpy on purpose) ---------------

REFERENCE_SOURCE = '''
import math, random, statistics

def percentile(values, p):
    if not values:
        return math.nan
    o = sorted(values)
    pos = (len(o) - 1) * p
    lo = math.floor(pos)
    hi = math.ceil(pos)
    if lo == hi:
        return o[lo]
    f = pos - lo
    return o[lo] * (1 - f) + o[hi] * f

def summarise(by_benchmark, samples, seed, add=sum):
    rng = random.Random(seed)
    out = {}
    for benchmark in sorted(by_benchmark):
        values = by_benchmark[benchmark]
        n = len(values)
        means = [add(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(samples)]
        out[benchmark] = (percentile(means, 0.025), percentile(means, 0.975))
    names = sorted(by_benchmark)
    boot = []
    for _ in range(samples):
        ms = []
        for name in names:
            v = by_benchmark[name]
            n = len(v)
            ms.append(add(v[rng.randrange(n)] for _ in range(n)) / n)
        boot.append(statistics.fmean(ms))
    return out, (percentile(boot, 0.025), percentile(boot, 0.975))
'''
_namespace: dict[str, object] = {}
exec(REFERENCE_SOURCE, _namespace)
summarise: Callable[..., tuple[dict[str, tuple[float, float]], tuple[float, float]]] = _namespace["summarise"]  # type: ignore[assignment]
percentile: Callable[[list[float], float], float] = _namespace["percentile"]  # type: ignore[assignment]


def neumaier_sum(items: Sequence[float] | object) -> float:
    """CPython 3.12's float sum(): start int 0, first item 0 + x, then Neumaier compensation."""
    iterator = iter(items)  # type: ignore[call-overload]
    first = next(iterator, None)
    if first is None:
        return 0
    s, c = 0 + first, 0.0
    for x in iterator:
        t = s + x
        if abs(s) >= abs(x):
            c += (s - t) + x
        else:
            c += (x - t) + s
        s = t
    if c and math.isfinite(c):
        s += c
    return s


def as_intervals(result: tuple[dict[str, tuple[float, float]], tuple[float, float]]) -> Intervals:
    return Intervals(result[0], result[1])


def scores(rnd: random.Random, n: int) -> list[float]:
    """Score-like floats: full-precision, rounded to 4 places, and the exact ends 0 and 1."""
    kinds = (lambda: rnd.random(), lambda: round(rnd.random(), 4), lambda: 0.0, lambda: 1.0, lambda: rnd.random() / 7)
    return [rnd.choice(kinds)() for _ in range(n)]


def dataset(sizes: dict[str, int], seed: int) -> dict[str, list[float]]:
    rnd = random.Random(seed)
    return {name: scores(rnd, n) for name, n in sizes.items()}


DATASETS: dict[str, dict[str, int]] = {
    "equal": {"a": 40, "b": 40, "c": 40},
    "close_same_k": {"drug_safety": 49, "landmark_trials": 50, "health_equity": 48},
    "straddle_pow2": {"a": 31, "b": 33, "c": 64, "d": 65},
    "singletons": {"one": 1, "few": 5, "also_one": 1},
    "single_benchmark": {"only": 20},
    "powers_of_two": {"a": 2, "b": 4, "c": 8, "d": 16, "e": 1},  # one threshold, four k's
    "large": {"big": 300, "odd": 17},
}


# --- the MT19937 stream --------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 42, 12345, -3, 2**70 + 11])
def test_stream_matches_random_getrandbits(seed: int) -> None:
    rng = random.Random(seed)
    stream = MT19937Stream(seed)
    got: list[int] = []
    # Uneven peeks and advances across buffer refills and the 624-word regeneration.
    for peek, advance in [(5, 3), (1000, 1000), (10, 0), (700, 650), (3000, 2999), (1, 1)]:
        window = stream.peek(peek)
        assert window.dtype == np.uint32 and window.size == peek
        got.extend(window[:advance].tolist())
        stream.advance(advance)
    got.extend(stream.take(1500).tolist())
    assert got == [rng.getrandbits(32) for _ in range(len(got))]


def test_stream_refuses_to_advance_past_buffer() -> None:
    stream = MT19937Stream(1)
    stream.peek(10)
    with pytest.raises(ValueError):
        stream.advance(11)


# --- draws: same indices and same outputs consumed as randrange ----------------------------

def expected_draws(rng: random.Random, sizes: Sequence[int], samples: int) -> list[list[int]]:
    """What the reference draws: per resample, n draws of randrange(n) for each size in turn."""
    return [[rng.randrange(n) for n in sizes for _ in range(n)] for _ in range(samples)]


ALL_SIZES = [(50,), (1,), (3, 1, 2), (49, 50, 48), (31, 33), (64, 65, 1), (300, 7), (2, 4, 8, 16)]
# The scan takes sizes of one bit length: incl. one size, n = 1, wide spreads and k = 9.
ONE_LENGTH_SIZES = [(50,), (1,), (2, 3), (3, 2, 2), (49, 50, 48), (33, 63, 40), (5, 7, 4, 6), (300, 257, 511)]


@pytest.mark.parametrize(("method", "sizes"), [("segments", s) for s in ALL_SIZES] + [("auto", s) for s in ALL_SIZES]
                         + [("scan", s) for s in ONE_LENGTH_SIZES])
@pytest.mark.parametrize("seed", [0, 12345])
def test_draw_equals_randrange_and_consumes_the_same(method: str, sizes: tuple[int, ...], seed: int) -> None:
    samples = 37
    rng = random.Random(seed)
    expected = expected_draws(rng, sizes, samples)
    stream = MT19937Stream(seed)
    table = _draw(stream, sizes, samples, method)
    assert table.shape == (samples, sum(sizes))
    assert table.tolist() == expected
    # The next consumer must see exactly the output randrange would read next.
    assert stream.take(5).tolist() == [rng.getrandbits(32) for _ in range(5)]


def test_scan_refuses_sizes_of_different_bit_lengths() -> None:
    with pytest.raises(ValueError, match="bit length"):
        _draw(MT19937Stream(0), (31, 33), 5, "scan")


def test_draw_random_sizes_all_methods() -> None:
    rnd = random.Random(2024)
    for trial in range(25):
        sizes = tuple(rnd.choice([1, 2, 3, rnd.randint(1, 130)]) for _ in range(rnd.randint(1, 6)))
        k = rnd.randint(1, 8)
        same_k = tuple(rnd.randint(1 << (k - 1), (1 << k) - 1) for _ in range(rnd.randint(1, 6)))
        samples, seed = rnd.randint(1, 12), rnd.randint(0, 10**6)
        expected = expected_draws(random.Random(seed), sizes, samples)
        assert _draw(MT19937Stream(seed), sizes, samples, "segments").tolist() == expected, sizes
        assert _draw(MT19937Stream(seed), same_k, samples, "scan").tolist() == expected_draws(random.Random(seed), same_k, samples)


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Pieces of 4096 outputs, scan passes of 1024, a fresh cache: every boundary is crossed often."""
    import toolkit.bootstrap._draws as bootstrap

    monkeypatch.setattr(bootstrap, "_PIECE", 1 << 12)
    monkeypatch.setattr(bootstrap, "_TABLE_BYTES", 1 << 10)
    monkeypatch.setattr(bootstrap, "_SEGMENT_CHUNK", 64)  # and block jumps grow their look-ahead
    monkeypatch.setattr(bootstrap, "_CACHE", bootstrap.index_cache.MemoryCache(1 << 30, bootstrap._LOCK))
    bootstrap._outputs.cache_clear()
    bootstrap.cached_indices.cache_clear()
    yield
    bootstrap._outputs.cache_clear()
    bootstrap.cached_indices.cache_clear()


@pytest.mark.parametrize("method", ["scan", "segments"])
def test_draws_survive_piece_and_pass_boundaries(small_pieces: None, method: str) -> None:
    for sizes, samples in [((5, 100, 33, 1), 20), ((100, 77, 64, 127), 30), ((3, 2), 700), ((1,), 5000)]:
        if method == "scan" and len({n.bit_length() for n in sizes}) > 1:
            continue
        rng = random.Random(7)
        expected = expected_draws(rng, sizes, samples)
        stream = MT19937Stream(7)
        assert _draw(stream, sizes, samples, method).tolist() == expected, sizes
        assert stream.take(5000).tolist() == [rng.getrandbits(32) for _ in range(5000)]  # spans pieces


def test_last_draw_on_a_between_output_ends_the_stream_right(monkeypatch: pytest.MonkeyPatch) -> None:
    import toolkit.bootstrap._draws as bootstrap

    # With sizes (2, 3) a draw of randrange(3) that reads index 2 is a between-output; ending on
    # one takes a replay to find where the stream stops. Count that the replay really runs.
    calls: list[int] = []
    replay = bootstrap._end_after_last_hit
    monkeypatch.setattr(bootstrap, "_end_after_last_hit", lambda *a: calls.append(1) or replay(*a))
    for seed in range(12):
        rng = random.Random(seed)
        expected = expected_draws(rng, (2, 3), 9)
        stream = MT19937Stream(seed)
        assert _draw(stream, (2, 3), 9, "scan").tolist() == expected
        assert stream.take(3).tolist() == [rng.getrandbits(32) for _ in range(3)]
    assert calls


def test_shared_stream_gives_the_same_indices_in_any_order() -> None:
    # Size tuples of one seed share the cached stream and what is derived from it; the
    # order they are asked in, or a cleared index cache, must not change any index.
    tuples = [(49, 50, 48), (1,), (48, 49, 47, 50), (31, 33, 1), (50, 50), (2, 3), (300, 7, 1)]
    settings = BootstrapSettings(samples=23, seed=777)
    for order in (tuples, tuples[::-1], tuples[2:] + tuples[:2]):
        _cached_indices.cache_clear()
        for sizes in order:
            per_benchmark, overall = reference_indices(sizes, settings)
            rng = random.Random(777)
            assert [a.tolist() for a in per_benchmark] == [expected_draws(rng, (n,), 23) for n in sizes]
            rows = expected_draws(rng, sizes, 23)
            bounds = np.cumsum((0, *sizes)).tolist()
            assert [a.tolist() for a in overall] == [[r[lo:hi] for r in rows] for lo, hi in zip(bounds, bounds[1:])]


def test_evicted_pieces_are_regenerated_exactly(small_pieces: None, monkeypatch: pytest.MonkeyPatch) -> None:
    import toolkit.bootstrap._draws as bootstrap

    # A cache far too small for the stream: pieces are dropped and made again from saved states.
    monkeypatch.setattr(bootstrap, "_CACHE", bootstrap.index_cache.MemoryCache(40_000, bootstrap._LOCK))
    made: list[int] = []
    generate = bootstrap._SeedOutputs._generate
    monkeypatch.setattr(bootstrap._SeedOutputs, "_generate", lambda self, i: made.append(i) or generate(self, i))
    for sizes in [(49, 50, 48), (40,), (31, 33)]:
        rng = random.Random(3)
        expected = expected_draws(rng, sizes, 60)
        stream = MT19937Stream(3)
        assert _draw(stream, sizes, 60).tolist() == expected
        assert stream.take(2).tolist() == [rng.getrandbits(32) for _ in range(2)]
    assert len(made) > len(set(made))  # some piece was really made twice


def test_reference_indices_shapes_cache_and_read_only() -> None:
    settings = BootstrapSettings(samples=11, seed=5)
    per_benchmark, overall = reference_indices([3, 1, 4], settings)
    assert [a.shape for a in per_benchmark] == [(11, 3), (11, 1), (11, 4)]
    assert [a.shape for a in overall] == [(11, 3), (11, 1), (11, 4)]
    rng = random.Random(5)
    for a, n in zip(per_benchmark, [3, 1, 4]):
        assert a.tolist() == [[rng.randrange(n) for _ in range(n)] for _ in range(11)]
    rows = [[[rng.randrange(n) for _ in range(n)] for n in (3, 1, 4)] for _ in range(11)]
    for b in range(3):
        assert overall[b].tolist() == [row[b] for row in rows]
    with pytest.raises(ValueError):
        per_benchmark[0][0, 0] = 1
    again, _ = reference_indices([3, 1, 4], settings)
    assert np.shares_memory(again[0], per_benchmark[0])  # served from the cache
    with pytest.raises(ValueError):
        reference_indices([3, 0], settings)


# --- intervals: exact equality with the reference -------------------------------------------

# Every dataset x samples x seed, except large n at 2000 samples, done once (keeps the file fast).
EXACT_CASES = [(name, samples, seed) for name in DATASETS for samples in (1, 7, 200, 2000) for seed in (0, 42, 12345)
               if not (name == "large" and samples == 2000 and seed != 42)]


@pytest.mark.parametrize(("name", "samples", "seed"), EXACT_CASES)
def test_intervals_equal_reference_exactly(name: str, samples: int, seed: int) -> None:
    values = dataset(DATASETS[name], seed + samples)
    got = reference_intervals(values, BootstrapSettings(samples=samples, seed=seed))
    assert got == as_intervals(summarise(values, samples, seed))


def test_protocol_defaults_equal_reference_exactly() -> None:
    values = dataset({"safety_diagnostic": 30, "safety_therapeutic": 29}, 3)
    got = reference_intervals(values)
    assert got == as_intervals(summarise(values, BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED))


def test_numpy_and_int_inputs_and_key_order() -> None:
    values = dataset({"z": 12, "a": 9}, 8)
    values["m"] = [0, 1, 1, 0, 1]  # ints: what the reference would see as 0/1 scores
    expected = as_intervals(summarise(values, 300, 42))
    shuffled = {k: np.array(values[k]) for k in ("m", "z", "a")}
    assert reference_intervals(shuffled, BootstrapSettings(samples=300)) == expected
    assert list(reference_intervals(shuffled, BootstrapSettings(samples=300)).benchmarks) == ["a", "m", "z"]


def test_same_sizes_reuse_indices() -> None:
    settings = BootstrapSettings(samples=500, seed=99)
    sizes = {"a": 13, "b": 14}
    reference_intervals(dataset(sizes, 1), settings)
    hits = _cached_indices.cache_info().hits
    second = dataset(sizes, 2)
    assert reference_intervals(second, settings) == as_intervals(summarise(second, 500, 99))
    assert _cached_indices.cache_info().hits == hits + 1


@pytest.mark.parametrize("seed", [0, 42])
@pytest.mark.parametrize("name", ["close_same_k", "straddle_pow2", "singletons"])
def test_compensated_summation_equals_python_312_sum(name: str, seed: int) -> None:
    values = dataset(DATASETS[name], seed)
    got = reference_intervals(values, BootstrapSettings(samples=300, seed=seed, summation="compensated"))
    assert got == as_intervals(summarise(values, 300, seed, add=neumaier_sum))


def test_summation_variants_really_differ() -> None:
    # Guards the two tests above against data on which both summations agree anyway.
    values = dataset(DATASETS["close_same_k"], 0)
    seq = reference_intervals(values, BootstrapSettings(samples=300, seed=0, summation="sequential"))
    comp = reference_intervals(values, BootstrapSettings(samples=300, seed=0, summation="compensated"))
    assert seq != comp


def test_default_summation_matches_running_interpreter() -> None:
    assert DEFAULT_SUMMATION == ("sequential" if sys.version_info < (3, 12) else "compensated")
    xs = [0.1] * 10 + [1e16, 1.0, -1e16]
    expected = sum(xs)
    rows = np.arange(len(xs))[None, :]
    assert float(resample_means(xs, rows)[0]) == expected / len(xs)


def _python_312_or_later() -> str | None:
    """A CPython >= 3.12 interpreter to run the reference under, if this machine has one."""
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates = [os.environ.get("BEDSIDE_PYTHON_312"), shutil.which("python3.12"), shutil.which("python3.13"),
                  *sorted(glob.glob(os.path.join(root, "versions", "3.1[2-9]*", "bin", "python")))]
    for exe in filter(None, candidates):
        try:
            probe = subprocess.run([exe, "-c", "import sys; print(sys.version_info >= (3, 12))"],
                                   capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0 and probe.stdout.strip() == "True":
            return exe
    return None


def test_compensated_equals_reference_run_under_python_312() -> None:
    exe = _python_312_or_later()
    if exe is None:
        pytest.skip("no CPython >= 3.12 found (set BEDSIDE_PYTHON_312)")
    cases = [(dataset(DATASETS[name], 5), seed) for name in ("close_same_k", "straddle_pow2") for seed in (0, 42)]
    program = REFERENCE_SOURCE + (
        "\nimport json, sys\n"
        "print(json.dumps([[{k: [a.hex(), b.hex()] for k, (a, b) in r[0].items()}, [x.hex() for x in r[1]]]"
        " for r in (summarise(v, 250, s) for v, s in json.load(sys.stdin))]))\n")
    run = subprocess.run([exe, "-c", program], input=json.dumps(cases), capture_output=True, text=True,
                         timeout=60, check=True)
    for (values, seed), (bench, overall) in zip(cases, json.loads(run.stdout)):
        expected = Intervals({k: (float.fromhex(a), float.fromhex(b)) for k, (a, b) in bench.items()},
                             (float.fromhex(overall[0]), float.fromhex(overall[1])))
        assert reference_intervals(values, BootstrapSettings(samples=250, seed=seed, summation="compensated")) == expected


# --- edge cases ----------------------------------------------------------------------------

def test_empty_input_gives_nan_overall() -> None:
    got = reference_intervals({})
    assert dict(got.benchmarks) == {} and all(math.isnan(x) for x in got.overall)


def test_empty_benchmark_is_refused() -> None:
    with pytest.raises(ValueError):
        reference_intervals({"a": [1.0], "b": []})


@pytest.mark.parametrize("kwargs", [{"samples": -1}, {"samples": 0}, {"samples": 1_000_001}, {"samples": 1.5},
                                    {"seed": None}, {"seed": "x"}, {"seed": -1}, {"summation": "kahan"}])
def test_settings_are_validated(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        BootstrapSettings(**kwargs)  # type: ignore[arg-type]


def test_percentile_reference_is_the_formula_not_numpy() -> None:
    rnd = random.Random(4)
    for size in (1, 2, 3, 10, 41, 10_000):
        xs = [rnd.random() * rnd.choice([1, 1e-3, 1e3]) for _ in range(size)]
        for p in (0.0, 0.025, 0.5, 0.975, 1.0, 1 / 3):
            assert percentile_reference(np.array(xs), p) == percentile(xs, p)
    assert math.isnan(percentile_reference(np.array([]), 0.5))
    # The formula is not numpy's lerp bit for bit: find a case where they part.
    differs = 0
    for _ in range(200):
        xs = [rnd.random() for _ in range(7)]
        differs += percentile_reference(xs, 0.3) != float(np.percentile(xs, 30))
    assert differs > 0


def test_interval_selects_the_same_order_statistics_as_a_sort() -> None:
    rnd = random.Random(9)
    for size in (1, 2, 3, 40, 1001, 10_000):
        for kind in ("floats", "ties", "signed zeros"):
            if kind == "floats":
                xs = [rnd.random() for _ in range(size)]
            elif kind == "ties":
                xs = [rnd.choice([0.25, 0.5, 0.75]) for _ in range(size)]
            else:  # 0.0 and -0.0 compare equal: only a stable sort says which one sits at a rank
                xs = [(rnd.choice([-rnd.random(), 1.0])) if rnd.random() < 0.03 else rnd.choice([0.0, -0.0])
                      for _ in range(size)]
            got = _interval(np.array(xs))
            want = (percentile(xs, CI_LOW), percentile(xs, CI_HIGH))
            assert [x.hex() for x in got] == [float(x).hex() for x in want], (size, kind)


def test_row_fmeans_equal_statistics_fmean() -> None:
    rnd = random.Random(11)
    groups = [
        [[rnd.random() for _ in range(10)] for _ in range(3000)],
        # Cancellation over wide exponent ranges: the error terms no longer add up exactly.
        [[rnd.choice([1e16, -1e16, 1.0, 1e-16, 3.3e-20, 0.1, -0.7]) for _ in range(7)] for _ in range(3000)],
        # 2**-60 + 2**-113 is a tie that only 2**-200 breaks: a double-double sum rounds it wrong.
        [[1.0, 2.0**-60, 2.0**-113, 2.0**-200, -1.0], [-0.0] * 5, [0.0, -0.0, -0.0, 0.0, -0.0],
         [1e308, -1e308, 1e308, 5e-324, -1e308], [math.inf, 1.0, 2.0, 3.0, 4.0], [math.nan, 0.0, 1.0, 2.0, 3.0]],
        [[x] for x in (0.5, -0.0, 1e-310)],
    ]
    for rows in groups:
        got = _fmeans(np.array(rows, dtype=np.float64)).tolist()
        assert [x.hex() for x in got] == [statistics.fmean(row).hex() for row in rows]


def test_threads_sharing_the_stream_caches_draw_exactly(small_pieces: None, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    import toolkit.bootstrap._draws as bootstrap

    # Summaries run two at a time: cache entries are made outside the lock, pieces of one seed by one
    # generator. A cache too small for the stream keeps pieces being dropped and made again meanwhile.
    monkeypatch.setattr(bootstrap, "_CACHE", bootstrap.index_cache.MemoryCache(200_000, bootstrap._LOCK))
    tuples = [(49, 50, 48), (40,), (31, 33), (2, 3), (100, 77, 64, 127), (50, 50, 47, 49), (7, 5, 6), (1,)]
    expected = {}
    for sizes in tuples:
        rng = random.Random(5)
        expected[sizes] = [expected_draws(rng, (n,), 40) for n in sizes] + [expected_draws(rng, sizes, 40)]
    problems: list[str] = []

    def draw_all(mine: list[tuple[int, ...]]) -> None:
        for sizes in mine:
            stream = MT19937Stream(5)
            got = [_draw(stream, (n,), 40).tolist() for n in sizes] + [_draw(stream, sizes, 40).tolist()]
            if got != expected[sizes]:
                problems.append(str(sizes))

    for _ in range(3):
        bootstrap._outputs.cache_clear()
        threads = [threading.Thread(target=draw_all, args=(tuples[i:] + tuples[:i],)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert problems == []
