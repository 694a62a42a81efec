"""Prices (toolkit.prices) and what stored runs cost (toolkit.analysis.costs): the matching rule, reasoning
counted once, batch rates, one line for a bad table, and dollars equal to tokens x prices by hand on a store
written here, with tokens shown where a price or a count is missing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from toolkit.analysis.costs import run_costs
from toolkit.prices import BUILT_IN, ModelPrice, PriceError, PriceTable, cost_text, load_prices
from toolkit.protocol import PROTOCOL_VERSION
from toolkit.selection import read_runs
from toolkit.store import Store

TABLE = """batch_discount = 0.5

[models."ans-1"]
input = 1.0
output = 4.0
reasoning = 6.0

[models."judge-1"]
input = 0.5
output = 2.0

[models."fam/*"]
input = 3.0
output = 3.0

[models."fam/big*"]
input = 10.0
output = 10.0
batch_discount = 0.25
"""


def _table(tmp_path: Path) -> PriceTable:
    path = tmp_path / "prices.toml"
    path.write_text(TABLE)
    return load_prices(path)


def test_exact_ids_then_the_longest_prefix_and_nothing_by_accident(tmp_path: Path) -> None:
    table = _table(tmp_path)
    assert table.price("ans-1").reasoning == 6.0
    assert table.price("ans-1-mini") is None  # a bare id is no prefix: another model, another price
    assert table.price("fam/small").input == 3.0 and table.price("fam/big-2").input == 10.0
    assert table.price("fam") is None and table.price(None) is None
    assert BUILT_IN.dollars("sim/strong", 1000, 1000) == 0.0 and BUILT_IN.dollars("gpt-4.1", 1, 1) is None


def test_reasoning_is_priced_at_its_rate_and_counted_once(tmp_path: Path) -> None:
    table = _table(tmp_path)
    # 1000 prompt, 500 completion of which 200 reasoning: 300 visible at 4.0, 200 at 6.0
    assert table.dollars("ans-1", 1000, 500, 200) == pytest.approx((1000 * 1.0 + 300 * 4.0 + 200 * 6.0) / 1e6)
    # no reasoning rate: every completion token at the output rate, reasoning included only once
    assert table.dollars("judge-1", 1000, 500, 200) == pytest.approx((1000 * 0.5 + 500 * 2.0) / 1e6)
    assert table.dollars("judge-1", 1000, 500, None) == table.dollars("judge-1", 1000, 500, 200)
    assert table.dollars("ans-1", 0, 100, 10 ** 6) == pytest.approx(100 * 6.0 / 1e6)  # never beyond the completion


def test_batch_rates_from_the_model_or_the_table_or_none(tmp_path: Path) -> None:
    table = _table(tmp_path)
    assert table.dollars("ans-1", 10 ** 6, 0, batch=True) == pytest.approx(0.5)
    assert table.dollars("fam/big", 10 ** 6, 0, batch=True) == pytest.approx(2.5)
    no_discount = PriceTable({"m": ModelPrice(1.0, 1.0)})
    assert no_discount.dollars("m", 10, 10, batch=True) is None  # the batch rate is unknown: no guess


@pytest.mark.parametrize(("text", "message"), [
    ('[models."m"]\ninput = 1\n', r"models.'m': output: missing"),
    ('[models."m"]\ninput = -1\noutput = 1\n', r"input: -1 is not a non-negative number"),
    ('[models."m"]\ninput = "cheap"\noutput = 1\n', r"input: 'cheap' is not"),
    ('[models."m"]\ninput = 1\noutput = 1\nprompt = 2\n', r"unknown key 'prompt'"),
    ('batch_discount = 2\n', r"batch_discount: 2 is not a fraction"),
    ('[models."a*b"]\ninput = 1\noutput = 1\n', r"'\*' may only end a key"),
    ("[prices]\nx = 1\n", r"unknown key 'prices'"),
    ("not toml [", r"invalid TOML"),
    # Finite but absurd: tokens x rate would overflow to "$inf", a dollar figure no one was charged.
    ('[models."m"]\ninput = 1e308\noutput = 1\n', r"input: 1e\+308 is above"),
    ("a = " + "[" * 100_000 + "]" * 100_000 + "\n", r"nested too deeply"),
])
def test_a_bad_price_table_is_one_line_naming_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(PriceError, match=message) as caught:
        load_prices(path)
    assert "bad.toml" in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(PriceError, match="No such file"):
        load_prices(tmp_path / "missing.toml")


def test_a_price_table_that_is_not_a_regular_file_is_one_line_and_never_hangs(tmp_path: Path) -> None:
    """/dev/zero would be read for ever, a FIFO waits for a writer that never comes: both refused at once."""
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo)):
        with pytest.raises(PriceError, match=re.escape(path)):
            load_prices(path)


def test_the_environment_names_the_table_and_a_path_wins(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(TABLE)
    monkeypatch.delenv("BEDSIDE_PRICES", raising=False)
    assert load_prices() is BUILT_IN
    monkeypatch.setenv("BEDSIDE_PRICES", str(path))
    assert load_prices().price("ans-1") is not None
    assert load_prices(BUILT_IN) is BUILT_IN  # a table given as is


def _run(store: Store, dataset, run_id: str, model: str, answers: list[dict], judgments: list[dict],
         steps: list[dict] | None = None) -> None:
    store.write("runs", run_id, [{
        "run_id": run_id, "answer_model": model, "judge_model": "judge-1", "protocol_version": PROTOCOL_VERSION,
        "dataset_sha256": dataset.sha256, "source": "collected", "created_at": "2025-01-01T00:00:00Z",
        "settings": None}])
    for step in steps or []:  # a collection step as `bedside run` records it
        store.commit_run(run_id, None, {"settings": json.dumps(step["settings"])}, step=step)
    case_ids = dataset.cases["case_id"].to_list()
    store.write("answers", run_id, [{"run_id": run_id, "case_id": case_ids[i], "attempt": a["attempt"], "seq": i,
                                     "answer_model": model, "answer": a.get("answer", "text"),
                                     "error": a.get("error"), "prompt_tokens": a.get("p"),
                                     "completion_tokens": a.get("c"), "reasoning_tokens": a.get("r")}
                                    for i, a in enumerate(answers)])
    store.write("judgments", run_id, [{"run_id": run_id, "case_id": case_ids[i], "judge_model": "judge-1",
                                       "judge_pass": 1, "attempt": j["attempt"], "seq": 100 + i,
                                       "raw_reply": "{}", "error": j.get("error"), "prompt_tokens": j.get("p"),
                                       "completion_tokens": j.get("c"), "reasoning_tokens": j.get("r")}
                                      for i, j in enumerate(judgments)])


ANSWERS = [{"attempt": 1, "p": 1200, "c": 800, "r": 300},
               {"attempt": 1, "p": 900, "c": 400},  # reasoning not reported: all 400 at the output rate
               {"attempt": 1, "answer": None, "error": "APITimeoutError: timed out"},  # no reply, no usage: free
           {"attempt": 2, "answer": None, "error": "ReplyTooLarge: cut", "p": 100, "c": 50}]  # paid for
JUDGMENTS = [{"attempt": 1, "p": 3000, "c": 40}, {"attempt": 2, "error": "InvalidReply: x", "p": 3100, "c": 60}]
ANSWER_USD = ((1200 * 1.0 + 500 * 4.0 + 300 * 6.0) + (900 * 1.0 + 400 * 4.0) + (100 * 1.0 + 50 * 4.0)) / 1e6
JUDGE_USD = ((3000 + 3100) * 0.5 + (40 + 60) * 2.0) / 1e6
TOKENS = 1200 + 800 + 900 + 400 + 100 + 50 + 3000 + 40 + 3100 + 60


def _store(root: Path, dataset) -> Store:
    store = Store.open(root)
    store.write_dataset(dataset)
    answers, judgments = ANSWERS, JUDGMENTS
    _run(store, dataset, "priced", "ans-1", answers, judgments)
    _run(store, dataset, "unpriced", "other-model", answers, judgments)
    _run(store, dataset, "unreported", "ans-1", [{"attempt": 1}], judgments)
    _run(store, dataset, "batched", "ans-1", answers, judgments, steps=[
        {"kind": "run", "settings": {"batch": True}}])
    _run(store, dataset, "mixed", "ans-1", answers, judgments, steps=[
        {"kind": "run", "settings": {"batch": True}}, {"kind": "run", "settings": {"batch": False}}])
    return store


def test_run_dollars_equal_tokens_times_prices_by_hand(tmp_path: Path, sample_dataset) -> None:
    store = _store(tmp_path / "store", sample_dataset)
    answer_usd, judge_usd = ANSWER_USD, JUDGE_USD
    costs = {r["run_id"]: r for r in run_costs(read_runs(store, store.run_ids(), texts=False),
                                               _table(tmp_path)).iter_rows(named=True)}
    priced = costs["priced"]
    assert priced["answer_calls"] == 3 and priced["judge_calls"] == 2  # the call without a reply is not counted
    assert priced["answer_usd"] == pytest.approx(answer_usd, rel=1e-12)
    assert priced["judge_usd"] == pytest.approx(judge_usd, rel=1e-12)
    assert priced["usd"] == pytest.approx(answer_usd + judge_usd, rel=1e-12)
    assert priced["usd_per_answer_call"] == pytest.approx(answer_usd / 3, rel=1e-12)
    assert priced["usd_per_judge_call"] == pytest.approx(judge_usd / 2, rel=1e-12)
    assert priced["tokens"] == TOKENS
    assert priced["cost"] == cost_text(answer_usd + judge_usd, None) == f"${answer_usd + judge_usd:.4f}"
    assert cost_text(1234.567, 9) == "$1,234.57" and cost_text(0.0, 9) == "$0.00" and cost_text(None, 12345) == \
        "12,345 tokens"

    unpriced = costs["unpriced"]  # the judge is priced, the answer model is not: no total in dollars
    assert unpriced["answer_usd"] is None and unpriced["judge_usd"] == pytest.approx(judge_usd)
    assert unpriced["usd"] is None and unpriced["cost"] == f"{priced['tokens']:,} tokens"
    assert costs["unreported"]["tokens"] is None and costs["unreported"]["cost"] == "unknown"
    assert costs["batched"]["usd"] == pytest.approx(0.5 * (answer_usd + judge_usd), rel=1e-12)
    assert costs["mixed"]["usd"] is None and costs["mixed"]["cost"].endswith(" tokens")


def test_bedside_runs_shows_dollars_where_priced_and_tokens_where_not(tmp_path: Path, sample_dataset,
                                                                        monkeypatch) -> None:
    from tests.test_cli_process import bedside_process

    store = str(_store(tmp_path / "store", sample_dataset).root)
    prices = tmp_path / "prices.toml"
    prices.write_text(TABLE)
    monkeypatch.delenv("BEDSIDE_PRICES", raising=False)
    done = bedside_process(["runs", "--store", store, "--prices", str(prices), "--json"])
    assert done.returncode == 0, done.stderr
    listed = {r["run_id"]: r for r in json.loads(done.stdout)}
    assert listed["priced"]["cost_usd"] == pytest.approx(ANSWER_USD + JUDGE_USD, rel=1e-12)
    assert listed["priced"]["cost"] == f"${ANSWER_USD + JUDGE_USD:.4f}"
    assert listed["unpriced"]["cost_usd"] is None and listed["unpriced"]["cost"] == f"{TOKENS:,} tokens"
    monkeypatch.setenv("BEDSIDE_PRICES", str(prices))  # the environment names the same table
    done = bedside_process(["runs", "--store", store, "--wide"])
    assert done.returncode == 0, done.stderr
    assert f"${ANSWER_USD + JUDGE_USD:.4f}" in done.stdout and f"{TOKENS:,} tokens" in done.stdout
    monkeypatch.delenv("BEDSIDE_PRICES")
    done = bedside_process(["runs", "--store", store, "--wide"])  # the built-in table prices only sim/
    assert "$" not in done.stdout and f"{TOKENS:,} tokens" in done.stdout
    prices.write_text('[models."m"]\ninput = "free"\noutput = 1\n')
    done = bedside_process(["runs", "--store", store, "--prices", str(prices)])
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.strip().count("\n") == 0 and "prices.toml: models.'m': input: 'free'" in done.stderr


def test_compare_says_what_each_run_cost(tmp_path: Path, demo_store: Path) -> None:
    import polars as pl

    from tests.test_cli_process import bedside_process

    prices = tmp_path / "prices.toml"
    prices.write_text('[models."sim/*"]\ninput = 1.5\noutput = 6.0\nreasoning = 9.0\n')
    done = bedside_process(["compare", "--all", "--store", str(demo_store), "--prices", str(prices),
                            "--format", "json", "--section", "leaderboard"])
    assert done.returncode == 0, done.stderr
    note = next(n for n in json.loads(done.stdout)["notes"] if n.startswith("cost (prices: "))
    store = Store.open(demo_store)
    for run in store.run_ids():
        usd = 0.0
        for table in ("answers", "judgments"):
            rows = store.read(table, [run]).filter(pl.col("prompt_tokens").is_not_null() | pl.col("error").is_null())
            reasoning = rows["reasoning_tokens"].fill_null(0)
            usd += float((rows["prompt_tokens"].fill_null(0) * 1.5 + (rows["completion_tokens"].fill_null(0)
                          - reasoning) * 6.0 + reasoning * 9.0).sum()) / 1e6
        assert f"{run} {cost_text(usd, None)}" in note  # $0.1234 below a dollar, $1.40 above (the demo's runs)


def test_the_report_shows_dollars_in_its_run_table_and_cost_figure(tmp_path: Path, demo_store: Path) -> None:
    import polars as pl

    from toolkit.report import ReportOptions, write_report

    prices = tmp_path / "prices.toml"
    prices.write_text('[models."sim/*"]\ninput = 1.5\noutput = 6.0\n')
    store = Store.open(demo_store)
    paths = write_report(store, None, tmp_path / "report", ReportOptions(samples=200, prices=str(prices)))
    costs = run_costs(read_runs(store, store.run_ids(), texts=False), load_prices(prices))
    runs = pl.read_csv(paths.directory / "tables" / "runs.csv")
    want = dict(costs.select("run_id", "cost").iter_rows())
    assert dict(runs.select("run_id", "cost").iter_rows()) == want and all(c.startswith("$") for c in want.values())
    figure = pl.read_csv(paths.directory / "tables" / "figure_cost.csv")
    called = store.read("answers").group_by("run_id").agg(pl.col("case_id").n_unique().alias("n"))
    for run_id, usd_per_case in figure.select("run_id", "usd_per_case").iter_rows():
        usd = costs.filter(pl.col("run_id") == run_id)["usd"][0]
        assert usd_per_case == pytest.approx(usd / called.filter(pl.col("run_id") == run_id)["n"][0], rel=1e-9)
    from toolkit import figures
    from toolkit.selection import JudgeSelection, per_case

    data = read_runs(store, store.run_ids(), texts=False)
    cases = per_case(data, JudgeSelection())
    assert figures.cost(data, cases, costs).axes[0].get_xlabel().startswith("USD per case")
    some_unpriced = costs.with_columns(usd=pl.when(pl.col("run_id") == "sim/weak").then(None).otherwise("usd"))
    assert figures.cost(data, cases, some_unpriced).axes[0].get_xlabel().startswith("prompt + completion tokens")
    html = paths.html.read_text(encoding="utf-8")
    assert "--prices" in html and str(prices.resolve()) in html  # the command that rebuilds it prices it alike
    plain = write_report(store, None, tmp_path / "plain", ReportOptions(samples=200, figures=False))
    shown = pl.read_csv(plain.directory / "tables" / "runs.csv")
    assert shown["cost"].to_list() == ["$0.00"] * shown.height  # the built-in table prices sim/ at nothing


def test_a_dry_run_prices_its_calls_from_the_given_table(tmp_path: Path) -> None:
    from tests.test_cli_process import bedside_process

    prices = tmp_path / "prices.toml"
    prices.write_text('[models."ans"]\ninput = 2.0\noutput = 8.0\n[models."judge-*"]\ninput = 1.0\noutput = 4.0\n')
    args = ["run", "--answer-model", "ans", "--judge-model", "judge-x", "--base-url", "http://127.0.0.1:9/v1",
            "--judge-base-url", "http://127.0.0.1:9/v1", "--store", str(tmp_path / "store"), "--dry-run"]
    done = bedside_process([*args, "--prices", str(prices)])
    assert done.returncode == 0, done.stderr
    lines = {line.split(":")[0]: line for line in done.stdout.splitlines()}
    for kind, (rate_in, rate_out) in {"answer": (2.0, 8.0), "judge": (1.0, 4.0)}.items():
        prompt, completion = (int(n.replace(",", "")) for n in
                              re.findall(r"~([0-9,]+) (?:prompt|completion)", lines[kind]))
        assert f"~${(prompt * rate_in + completion * rate_out) / 1e6:,.2f}" in lines[kind]
    assert f"prices: {prices}" in lines["total"]
    done = bedside_process([*args, "--prices", str(tmp_path / "missing.toml")])
    assert done.returncode != 0 and done.stdout == "" and not (tmp_path / "store").exists()
    assert done.stderr.strip() == f"bedside: error: price table {tmp_path / 'missing.toml'}: No such file or directory"
