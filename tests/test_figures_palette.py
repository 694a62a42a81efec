"""One order and one colour per run: every figure's data twin lists runs in leaderboard order, every run is
drawn in the same colour in every figure (read back from the drawn artists), and labels never overlap at
37 runs."""

from __future__ import annotations

import polars as pl
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

from tests.test_figures import FAST, RUNS, _many_runs, cases, cmp, data, store  # noqa: F401 - fixtures
from toolkit import figures
from toolkit.analysis import (AgreementOptions, HarmOptions, analyse_items, harms, judge_agreement)
from toolkit.figures.style import short_labels


def _first_seen(values: list[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _twins(cmp, data, cases, palette):  # noqa: ANN001, ANN202 - fixtures
    harm = harms(data, HarmOptions(resamples=FAST))
    agreement = judge_agreement(data, AgreementOptions(resamples=FAST))
    return {
        "leaderboard": ((cmp,), True),
        "benchmark_heatmap": ((cmp,), False),
        "score_distributions": ((cases,), True),
        "harm_rates": ((harm,), True),
        "precision_recall": ((harm,), True),
        "judge_agreement": ((agreement,), True),
        "length_bias": ((data, cases), True),
        "cost": ((data, cases), True),
        "win_delta_matrix": ((cmp, cases), False),
    }


def test_every_data_twin_lists_runs_in_leaderboard_order(cmp, data, cases) -> None:
    board = cmp.leaderboard["run_id"].to_list()
    assert board != sorted(board)  # the store's and the alphabet's order differ from the leaderboard's
    palette = figures.palette_for(cmp)
    assert list(palette)[:len(board)] == board
    for name, (args, coloured) in _twins(cmp, data, cases, palette).items():
        frame = getattr(figures, f"{name}_data")(*args, **({"palette": palette} if coloured else {}))
        column = "row" if name == "win_delta_matrix" else "run_id"
        seen = _first_seen(frame[column].to_list())
        assert seen == [r for r in palette if r in seen], name  # ranked runs, then r3 (not ranked)


def _run_colours(fig: Figure, labels: dict[str, str]) -> dict[str, set[str]]:
    """Run id -> colours of the artists drawn for it: labelled lines and markers (a label or a series
    "label: a − b" naming the run), and per-point markers on an axis whose y ticks are run labels."""
    by_label = {v: k for k, v in labels.items()}
    out: dict[str, set[str]] = {}

    def run_of(label: str) -> str | None:
        label = label.split(": ", 1)[0] if ": " in label else label
        return by_label.get(label)

    for ax in fig.axes:
        ticks = [t.get_text() for t in ax.get_yticklabels()]
        for line in ax.lines:
            run = run_of(line.get_label())
            if run:
                out.setdefault(run, set()).add(to_hex(line.get_color()))
        for coll in ax.collections:
            if not isinstance(coll, PathCollection) or not len(coll.get_offsets()):
                continue
            faces, edges = coll.get_facecolors(), coll.get_edgecolors()
            filled = [to_hex(c) for c in faces if to_hex(c) != "#ffffff"]
            run = run_of(coll.get_label())
            if run:
                out.setdefault(run, set()).update(filled or [to_hex(c) for c in edges])
            elif len(faces) == len(coll.get_offsets()) > 1 and ticks and all(t in by_label for t in ticks):
                for (_, y), face in zip(coll.get_offsets(), faces):
                    out.setdefault(by_label[ticks[int(round(y))]], set()).add(to_hex(face))
    return out


def test_each_run_has_one_colour_in_every_figure(cmp, data, cases) -> None:
    palette = figures.palette_for(cmp)
    ranked = cmp.leaderboard["run_id"].to_list()  # r3 misses a benchmark: not ranked, last in the palette
    labels = short_labels(RUNS)
    drawn: dict[str, dict[str, set[str]]] = {}
    for name, (args, coloured) in _twins(cmp, data, cases, palette).items():
        if coloured and name != "harm_rates":  # harm_rates colours the safety benchmarks (greys), not runs
            drawn[name] = _run_colours(getattr(figures, name)(*args, palette=palette), labels)
    assert set(drawn["leaderboard"]) == set(ranked)
    assert all(len(c) == 1 for c in drawn["leaderboard"].values())
    reference = {run: next(iter(c)) for run, c in drawn["leaderboard"].items()}
    assert len(set(reference.values())) == len(ranked)
    for name, colours in drawn.items():
        assert colours, f"{name}: no run-coloured artist found"
        for run, seen in colours.items():
            if run in reference:
                assert seen == {reference[run]}, (name, run, seen, reference[run])
    union: dict[str, set[str]] = {}
    for colours in drawn.values():
        for run, seen in colours.items():
            union.setdefault(run, set()).update(seen)
    assert set(union) == set(RUNS) and all(len(c) == 1 for c in union.values()), union  # r3 too, though not ranked
    assert len({next(iter(c)) for c in union.values()}) == len(RUNS)
    assert len(drawn["judge_agreement"]) == 2  # r0 (two passes) and r1 (two judges), in their own colours


def test_beyond_eight_runs_every_run_keeps_one_distinct_shade() -> None:
    ids = [f"run-{i:02d}" for i in range(12)]
    palette = figures.palette_for(ids)
    assert list(palette) == ids and len(set(palette.values())) == 12
    assert list(figures.palette_for(ids[:8]).values())[:3] == ["#0072B2", "#E69F00", "#009E73"]


def _overlapping_labels(fig: Figure) -> list[tuple[str, str]]:
    renderer = FigureCanvasAgg(fig).get_renderer()
    out = []
    for ax in fig.axes:
        for texts in (ax.get_xticklabels(), ax.get_yticklabels()):
            boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts if t.get_text() and t.get_visible()]
            out += [(a, b) for i, (a, box) in enumerate(boxes) for b, other in boxes[i + 1:] if box.overlaps(other)]
    return out


def test_thirty_seven_runs_labels_never_overlap() -> None:
    cmp37, cases37 = _many_runs(37, per_benchmark=4)
    palette = figures.palette_for(cmp37)
    for name, fig in (("leaderboard", figures.leaderboard(cmp37, palette=palette)),
                      ("benchmark_heatmap", figures.benchmark_heatmap(cmp37)),
                      ("score_distributions", figures.score_distributions(cases37, palette=palette))):
        assert _overlapping_labels(fig) == [], name
        ticks = [t for t in fig.axes[0].get_yticklabels() if t.get_text()]
        assert name == "score_distributions" or len(ticks) == 37, name
