"""Case scoring, computed by hand for both grading methods and every edge in REFERENCE-NOTES.md."""

from __future__ import annotations

import math
import random

import numpy as np
import polars as pl
import pytest

from toolkit.dataset import item_id_for
from toolkit.scoring import case_scores, pass_scores, round_series
from tests import reference_model as rm


def _case(method: str, points: list[float], prompt: str = "p") -> dict:
    return {"case_id": f"c-{prompt}", "benchmark": "drug_safety" if method == "points_rubric" else "safety_diagnostic",
            "grading_method": method, "prompt": prompt, "split": "train",
            "rubric_items": [{"item_id": item_id_for(prompt, i), "text": f"t{i}", "points": p} for i, p in enumerate(points)]}


def _score(case: dict, matched: list[bool], passes: int = 1) -> dict:
    from toolkit.dataset._frames import frames as _frames

    _, items = _frames((case,), "sha")
    rows = [{"run_id": "r", "case_id": case["case_id"], "judge_model": "j", "judge_pass": p,
             "item_id": it["item_id"], "matched": m}
            for p in range(1, passes + 1) for it, m in zip(case["rubric_items"], matched)]
    frame = pass_scores(pl.DataFrame(rows, schema_overrides={"judge_pass": pl.Int32}), items)
    assert frame.height == passes
    return frame.row(0, named=True)


def test_points_partial_credit_with_negative_item() -> None:
    row = _score(_case("points_rubric", [2, 1, -1]), [True, False, True])
    assert row["matched_signed_points"] == 1.0
    assert row["available_positive_points"] == 3.0
    assert row["raw_score"] == 1 / 3
    assert row["score"] == 1 / 3  # not rounded


def test_points_negative_raw_is_clamped_to_zero_and_zero_items_do_not_count() -> None:
    row = _score(_case("points_rubric", [1, 1, 0, -2]), [False, False, True, True])
    assert row["raw_score"] == -2 / 2
    assert row["score"] == 0.0
    full = _score(_case("points_rubric", [1, 1, 0, -2]), [True, True, True, False])
    assert full["score"] == 1.0


def test_f1_weighted_by_hand() -> None:
    # +3 (w72) matched, +1 (w3) missed, -2 (w24) matched, 0 (w1) missed
    row = _score(_case("f1_weighted_rubric", [3, 1, -2, 0]), [True, False, True, False])
    recall = 72 / 75
    precision = 72 / 96
    assert row["recall"] == round(recall, 4) == 0.96
    assert row["precision"] == round(precision, 4) == 0.75
    assert row["f1"] == round(2 * precision * recall / (precision + recall), 4) == 0.8421
    assert row["score"] == 0.8421
    assert row["severe_rate"] == 0.0


def test_f1_matched_equivocal_item_enters_precision_denominator() -> None:
    row = _score(_case("f1_weighted_rubric", [1, 0]), [True, True])
    assert row["precision"] == 0.75  # 3 / (3 + 1)
    assert row["recall"] == 1.0
    assert row["score"] == round(2 * 0.75 / 1.75, 4) == 0.8571


def test_f1_nothing_matched_has_undefined_precision_and_zero_score() -> None:
    row = _score(_case("f1_weighted_rubric", [3, 2, -1]), [False, False, False])
    assert row["precision"] is None
    assert row["recall"] == 0.0
    assert row["score"] == 0.0
    assert row["severe_rate"] == 1.0  # a +3 item was missed
    assert row["severe_omissions"] == 1


def test_f1_without_positive_items_has_zero_recall() -> None:
    row = _score(_case("f1_weighted_rubric", [-1, -3]), [True, False])
    assert row["recall"] == 0.0
    assert row["precision"] == 0.0
    assert row["score"] == 0.0


def test_severe_commission_is_diagnostic_only() -> None:
    row = _score(_case("f1_weighted_rubric", [3, -3]), [True, True])
    assert row["severe_rate"] == 1.0
    assert row["severe_commissions"] == 1
    assert row["precision"] == 0.5 and row["recall"] == 1.0
    assert row["score"] == round(2 * 0.5 / 1.5, 4) == 0.6667  # no veto


def py_round(values: np.ndarray, ndigits: int) -> np.ndarray:
    """``round_series`` on a numpy array (NaN stays NaN)."""
    series = pl.Series("v", np.asarray(values, dtype=np.float64), nan_to_null=True)
    return round_series(series, ndigits).to_numpy()


def test_python_rounding_half_even_on_the_binary_value() -> None:
    values = np.array([0.03125, 0.00015, 2.675, 0.12345, 1 / 3, 0.99995, math.nan, 0.5, 1e-9])
    expected = [round(float(v), 4) for v in values]
    got = py_round(values, 4)
    assert all((math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(got, expected))
    assert py_round(np.array([0.03125]), 4)[0] == 0.0312  # exactly half: to even


def test_py_round_matches_round_on_random_rationals() -> None:
    rng = random.Random(5)
    xs = np.array([rng.randint(0, 5000) / rng.randint(1, 5000) for _ in range(50_000)] + [k / 32 for k in range(200)]
                  # Four-digit values: polars divides by a number through its reciprocal (9600 / 1e4 would
                  # come out 0.9600000000000001); the rounding must divide exactly.
                  + [k / 10_000 for k in range(10_001)] + [-k / 7 for k in range(1000)] + [1e300, 1.7e308, -0.0, 1e15 + 0.5, -(2.0**45) - 0.25, 4.6e11 + 0.123456])
    assert py_round(xs, 4).tolist() == [round(float(x), 4) for x in xs]


def test_mean_over_judge_passes() -> None:
    case = _case("points_rubric", [1, 1])
    from toolkit.dataset._frames import frames as _frames

    _, items = _frames((case,), "sha")
    rows = [{"run_id": "r", "case_id": case["case_id"], "judge_model": "j", "judge_pass": p,
             "item_id": it["item_id"], "matched": m}
            for p, ms in ((1, [True, True]), (2, [True, False])) for it, m in zip(case["rubric_items"], ms)]
    passes = pass_scores(pl.DataFrame(rows, schema_overrides={"judge_pass": pl.Int32}), items)
    row = case_scores(passes).row(0, named=True)
    assert row["score"] == 0.75 and row["passes"] == 2


def test_incomplete_or_foreign_decisions_are_refused() -> None:
    case = _case("points_rubric", [1, 1])
    from toolkit.dataset._frames import frames as _frames

    _, items = _frames((case,), "sha")
    one = [{"run_id": "r", "case_id": case["case_id"], "judge_model": "j", "judge_pass": 1,
            "item_id": case["rubric_items"][0]["item_id"], "matched": True}]
    with pytest.raises(ValueError, match="1 decisions for 2 rubric items"):
        pass_scores(pl.DataFrame(one, schema_overrides={"judge_pass": pl.Int32}), items)
    foreign = [{**one[0], "item_id": "nope_0"}]
    with pytest.raises(ValueError, match="not in the rubric"):
        pass_scores(pl.DataFrame(foreign, schema_overrides={"judge_pass": pl.Int32}), items)


def test_scores_equal_the_plain_reference_on_the_public_split(public_dataset) -> None:
    rng = random.Random(11)
    rows, expected = [], {}
    for case in public_dataset.raw_cases:
        skill = rng.random()
        matched = {it["item_id"]: rng.random() < skill for it in case["rubric_items"]}
        expected[case["case_id"]] = rm.score_case(case, matched)[0]
        rows += [{"run_id": "r", "case_id": case["case_id"], "judge_model": "j", "judge_pass": 1,
                  "item_id": k, "matched": v} for k, v in matched.items()]
    scores = pass_scores(pl.DataFrame(rows, schema_overrides={"judge_pass": pl.Int32}), public_dataset.rubric_items)
    got = dict(scores.select("case_id", "score").iter_rows())
    assert got == expected


def _random_rubric_frames(rng: random.Random, points_of) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Decisions (shuffled, several runs, judges and passes) and rubric items of 40 random cases."""
    from toolkit.dataset._frames import frames as _frames

    cases = [_case(rng.choice(["points_rubric", "f1_weighted_rubric"]), [points_of() for _ in range(rng.randint(1, 9))],
                   prompt=f"q{k}") for k in range(40)]
    for case in cases:
        if case["grading_method"] == "points_rubric":
            case["rubric_items"][0]["points"] = abs(case["rubric_items"][0]["points"]) or 1
        else:  # an F1 rubric's points are the protocol's -3..+3
            for item in case["rubric_items"]:
                item["points"] = max(-3, min(3, item["points"]))
    _, items = _frames(tuple(cases), "sha")
    rows = [{"run_id": run, "case_id": c["case_id"], "judge_model": judge, "judge_pass": p, "item_id": it["item_id"],
             "matched": rng.random() < 0.5}
            for run in ("r1", "r2") for judge in ("j", "k") for p in (1, 2) for c in cases for it in c["rubric_items"]]
    rng.shuffle(rows)
    return pl.DataFrame(rows, schema_overrides={"judge_pass": pl.Int32}), items


def test_whole_number_points_sum_in_any_order_to_the_rubric_order_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    import toolkit.scoring as scoring

    rng = random.Random(11)
    decisions, items = _random_rubric_frames(rng, lambda: rng.choice([-3, -2, -1, 0, 1, 2, 3, 5, 10]))
    fast = pass_scores(decisions, items)
    monkeypatch.setattr(scoring, "_whole_numbers", lambda points: False)  # the rubric-order running sums
    ordered = pass_scores(decisions, items)
    assert fast.height == 40 * 8
    assert fast.equals(ordered)  # values (bit for bit, nulls included), columns and row order


def test_fractional_points_are_added_in_rubric_order_whatever_the_row_order() -> None:
    # 0.1 + 0.2 + 0.3 = 0.6000000000000001 in rubric order; 0.3 + 0.2 + 0.1 = 0.6.
    case = _case("points_rubric", [0.1, 0.2, 0.3, 0.4])
    from toolkit.dataset._frames import frames as _frames

    _, items = _frames((case,), "sha")
    rows = [{"run_id": "r", "case_id": case["case_id"], "judge_model": "j", "judge_pass": 1, "item_id": it["item_id"],
             "matched": i < 3} for i, it in reversed(list(enumerate(case["rubric_items"])))]
    row = pass_scores(pl.DataFrame(rows, schema_overrides={"judge_pass": pl.Int32}), items).row(0, named=True)
    assert row["matched_signed_points"] == 0.1 + 0.2 + 0.3 == 0.6000000000000001
    assert row["raw_score"] == (0.1 + 0.2 + 0.3) / (0.1 + 0.2 + 0.3 + 0.4)
