"""`bedside run | judge | demo` end to end: keys stay secret, hostile names stay inside the store, dry runs
call nothing, stored answers are judged again without being regenerated, batch mode, the demo."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl

from tests.collect_support import Recorder, bedside, completion, error, files_under, judge_reply
from toolkit.sim import SimConfig, SimServer
from toolkit.selection import JudgeSelection
from toolkit.store import Store
from toolkit.summary import SummaryOptions, summarize

ROOT = Path(__file__).resolve().parents[1]
SENTINEL = "sk-SENTINEL-7f3a9c21e4b8d650aa11"


def test_api_key_never_reaches_the_store_settings_errors_or_output(tmp_path: Path, monkeypatch) -> None:
    store_dir = tmp_path / "store"
    monkeypatch.setenv("BEDSIDE_TEST_KEY", SENTINEL)
    env = dict(os.environ)
    with SimServer(SimConfig(api_key=SENTINEL, rate_429=0.1, rate_5xx=0.1, seed=2)) as sim:
        result = subprocess.run(
            [sys.executable, "-m", "toolkit", "run", "--answer-model", "sim/medium", "--judge-model", "sim/judge",
             "--base-url", sim.base_url, "--api-key-env", "BEDSIDE_TEST_KEY", "--store", str(store_dir),
             "--limit", "6", "--progress", "plain", "--retry-base-delay", "0.01", "--max-retries", "10"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert sim.stats()["chat_completions"]["faults"]["auth"] == 0  # the key was sent, and accepted

    # a provider that echoes the key in an error: the stored error text is scrubbed
    def echo(body: dict[str, Any]) -> tuple:
        key = rec.headers[-1]["Authorization"].split()[1]
        if body["model"] == "judge":
            return completion(judge_reply(body))
        return error(400, f"request from key {key} rejected; key prefix {key[:12]}")

    with Recorder(echo) as rec:
        code, out, err = bedside("run", "--answer-model", "ans", "--judge-model", "judge", "--base-url", rec.base_url,
                                 "--api-key-env", "BEDSIDE_TEST_KEY", "--judge-base-url", rec.base_url,
                                 "--judge-api-key-env", "BEDSIDE_TEST_KEY", "--store", store_dir, "--limit", "1",
                                 "--progress", "plain")
    assert code == 3
    stored_error = Store.open(store_dir).read("answers", ["ans"])["error"][0]
    assert "request from key *** rejected" in stored_error
    runs = Store.open(store_dir).read("runs")
    assert json.loads(runs["settings"][0])["answer_endpoint"]["api_key_env"] == ["BEDSIDE_TEST_KEY"]
    for path in files_under(store_dir):
        data = path.read_bytes()
        assert SENTINEL.encode() not in data and SENTINEL[:12].encode() not in data, path
    for text in (result.stdout, result.stderr, out, err):
        assert SENTINEL not in text and SENTINEL[:12] not in text


def test_hostile_run_ids_and_model_names_stay_inside_the_store(tmp_path: Path) -> None:
    store_dir = tmp_path / "deep" / "store"
    with Recorder(lambda b: completion(judge_reply(b)) if b["model"] == "judge" else completion("x")) as rec:
        for extra in (["--answer-model", "accounts/fireworks/models/x"],
                      ["--answer-model", "m", "--run-id", "../x"],
                      ["--answer-model", "m", "--run-id", "../../etc/passwd"]):
            code, _, err = bedside("run", *extra, "--judge-model", "judge", "--base-url", rec.base_url,
                                   "--judge-base-url", rec.base_url, "--store", store_dir, "--limit", "1",
                                   "--progress", "none")
            assert code == 0, err
        assert rec.of_model("accounts/fireworks/models/x")  # the model name is sent as given
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep"]
    assert sorted(p.name for p in (tmp_path / "deep").iterdir()) == ["store"]
    store = Store.open(store_dir)
    assert sorted(store.run_ids()) == ["../../etc/passwd", "../x", "accounts/fireworks/models/x"]
    for path in files_under(store_dir):
        assert path.resolve().is_relative_to(store_dir.resolve())
    assert summarize(store, ["../x"])["../x"]["completed_cases"] == 1


def test_dry_run_calls_nothing_and_writes_nothing(tmp_path: Path, monkeypatch) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('batch_discount = 0.5\n[models."ans"]\ninput = 2.0\noutput = 8.0\n')
    monkeypatch.setenv("BEDSIDE_PRICES", str(prices))
    with Recorder(lambda b: completion("x")) as rec:
        args = ("run", "--answer-model", "ans", "--judge-model", "judge", "--base-url", rec.base_url,
                "--judge-base-url", rec.base_url, "--store", tmp_path / "store", "--judge-passes", "2")
        code, out, err = bedside(*args, "--dry-run")
        assert code == 0, err
        assert rec.bodies == [] and not (tmp_path / "store").exists()
        assert "answer: 30 calls to ans at " + rec.base_url in out
        assert "judge: 60 calls to judge" in out and "cost unknown" in out  # judge is not priced
        answer_line = next(line for line in out.splitlines() if line.startswith("answer:"))
        assert "completion tokens; ~$" in answer_line and "no key needed" in answer_line
        code, out, _ = bedside(*args, "--dry-run", "--batch")
        assert "at batch prices" in out


def test_judge_command_adds_a_judge_and_a_pass_without_new_answers(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    with SimServer(SimConfig(seed=4)) as sim:
        base = ("--store", store_dir, "--progress", "none")
        code, _, err = bedside("run", "--answer-model", "sim/medium", "--judge-model", "sim/judge", "--base-url",
                               sim.base_url, "--limit", "6", *base)
        assert code == 0, err
        code, out, err = bedside("judge", "--run", "sim/medium", "--judge-model", "sim/judge-notemp", *base)
        assert code == 0, err
        code, out, err = bedside("judge", "--run", "sim/medium", "--judge-model", "sim/judge", "--pass", "2", *base)
        assert code == 0, err
        again = bedside("judge", "--run", "sim/medium", "--judge-model", "sim/judge", "--judge-passes", "2", *base)
        stats = sim.stats()["chat_completions"]["by_model"]
        url = sim.base_url
    assert again[0] == 0 and "sim/medium: 0 judgments by sim/judge of stored answers (12 already stored)" in again[1]
    assert stats["sim/medium"]["served_ok"] == 6  # answers were never regenerated
    assert stats["sim/judge"]["served_ok"] == 12 and stats["sim/judge-notemp"]["served_ok"] == 6
    store = Store.open(store_dir)
    judgments = store.read("judgments")
    counts = judgments.group_by("judge_model", "judge_pass").len().sort("judge_model", "judge_pass")
    assert counts.rows() == [("sim/judge", 1, 6), ("sim/judge", 2, 6), ("sim/judge-notemp", 1, 6)]
    assert judgments.filter(pl.col("judge_model") == "sim/judge-notemp")["judge_temperature"].null_count() == 6
    default = summarize(store, ["sim/medium"])["sim/medium"]
    assert default["judge_model"] == "sim/judge" and default["judge_passes_per_answer"] == 2
    other = summarize(store, ["sim/medium"], SummaryOptions(selection=JudgeSelection(judge="sim/judge-notemp")))
    assert other["sim/medium"]["judge_passes_per_answer"] == 1 and other["sim/medium"]["judge_temperature"] is None
    one = summarize(store, ["sim/medium"], SummaryOptions(selection=JudgeSelection(passes=(2,))))["sim/medium"]
    assert one["judge_passes_per_answer"] == 1 and one["completed_cases"] == 6
    settings = json.loads(store.run("sim/medium")["settings"])
    assert settings["additional_judges"]["sim/judge-notemp"]["base_url"] == url


def test_judge_with_two_runs_judges_both_and_an_unknown_one_judges_neither(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    with SimServer(SimConfig(seed=4)) as sim:
        base = ("--store", store_dir, "--progress", "none")
        for model in ("sim/medium", "sim/weak"):
            code, _, err = bedside("run", "--answer-model", model, "--judge-model", "sim/judge", "--base-url",
                                   sim.base_url, "--limit", "3", *base)
            assert code == 0, err
        code, _, err = bedside("judge", "--run", "sim/medium", "--run", "nobody", "--judge-model", "sim/judge-notemp",
                               *base)
        assert code == 1 and err.count("\n") == 1 and "nobody" in err, err
        code, out, err = bedside("judge", "--run", "sim/medium", "--run", "sim/weak", "--judge-model",
                                 "sim/judge-notemp", *base)
        judged = sim.stats()["chat_completions"]["by_model"]["sim/judge-notemp"]["served_ok"]
    assert code == 0, err
    assert "sim/medium: 3 judgments by sim/judge-notemp" in out and "sim/weak: 3 judgments by sim/judge-notemp" in out
    assert judged == 6
    judgments = Store.open(store_dir).read("judgments").filter(pl.col("judge_model") == "sim/judge-notemp")
    assert judgments.group_by("run_id").len().sort("run_id").rows() == [("sim/medium", 3), ("sim/weak", 3)]


def test_batch_mode_collects_and_resumes_an_in_flight_batch(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    with SimServer(SimConfig(rate_bad_json=0.2, seed=3, batch_delay_s=0.3)) as sim:
        cmd = ["run", "--answer-model", "sim/weak-notemp", "--judge-model", "sim/judge", "--base-url", sim.base_url,
               "--store", str(store_dir), "--limit", "8", "--batch"]
        proc = subprocess.Popen([sys.executable, "-m", "toolkit", *cmd], cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        state = store_dir / "journal" / "sim%2Fweak-notemp" / "batch.json"
        deadline = time.monotonic() + 30
        while not (state.exists() and json.loads(state.read_text()).get("batch_id")):
            assert time.monotonic() < deadline and proc.poll() is None, "no batch was submitted"
            time.sleep(0.01)
        in_flight = json.loads(state.read_text())["batch_id"]
        proc.kill()
        proc.wait(10)
        code, out, err = bedside(*cmd)
        batches = sim.stats()["batches"]
    assert code == 0, err
    assert f"answer batch {in_flight}: completed" in out  # collected, not submitted again
    store = Store.open(store_dir)
    answers, judgments = store.read("answers"), store.read("judgments")
    # the -notemp model rejects every line that carries a temperature: those lines are asked again, in a
    # second batch without it, and the answers record a null temperature
    assert answers.filter(pl.col("error").is_null()).height == 8 and answers.height == 8
    assert answers["answer_temperature"].null_count() == 8
    assert batches["by_model"]["sim/weak-notemp"]["served_ok"] == 8
    assert judgments.filter(pl.col("error").is_null()).height == 8
    assert judgments.filter(pl.col("error").is_not_null()).height == batches["bad_json"]
    assert judgments["latency_s"].null_count() == judgments.height
    assert batches["duplicates_ok"] == batches["bad_json"]  # only invalid judge replies were asked again
    assert summarize(store, ["sim/weak-notemp"])["sim/weak-notemp"]["completed_cases"] == 8
    assert not state.exists()


def test_demo_prints_a_leaderboard_of_simulated_models(tmp_path: Path) -> None:
    code, out, err = bedside("demo", "--store", tmp_path / "demo", "--progress", "none")
    assert code == 0, err
    board = [line for line in out.splitlines() if line.startswith("│")]
    order = [next(m for m in ("sim/strong", "sim/medium", "sim/skill-0.45", "sim/weak") if m in line) for line in board]
    assert order == ["sim/strong", "sim/medium", "sim/skill-0.45", "sim/weak"]
    assert "Not for clinical use" in out
    # the four runs are collected at once: their one wall time is said once per collection, not as each run's
    runs = [line for line in out.splitlines() if line.startswith("sim/") and " by sim/judge" in line]
    assert len(runs) == 8 and not any(re.search(r" in \d+\.\ds$", line) for line in runs), runs
    together = re.findall(r"^the 4 runs above were (?:collected|judged) at once in \d+\.\ds \(one wall time for the "
                          r"4\)$", out, re.M)
    assert len(together) == 2, out
    store = Store.open(tmp_path / "demo")
    assert len(store.run_ids()) == 4
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    code, _, err = bedside("demo", "--store", tmp_path / "mine", "--progress", "none")
    assert code == 1 and "not part of a bedside store" in err and (tmp_path / "mine" / "notes.txt").exists()
    code, out, _ = bedside("demo", "--help")
    assert code == 0 and "Calls in flight at the simulated endpoint, shared by the four models" in " ".join(out.split())


def test_a_key_given_where_its_variable_name_belongs_is_refused_and_never_echoed(tmp_path: Path) -> None:
    pasted = "sk-proj-PASTED-abc123def456ghi789"
    for command in (("run", "--answer-model", "gpt-x", "--api-key-env", pasted),
                    ("run", "--answer-model", "gpt-x", "--judge-api-key-env", pasted, "--dry-run"),
                    ("run", "--answer-model", "gpt-x", "--api-key-env", "1BAD", "--dry-run"),
                    ("judge", "--run", "r", "--judge-model", "j", "--judge-api-key-env", pasted)):
        code, out, err = bedside(*command, "--store", tmp_path / "s")
        flag = next(a for a in command if a.endswith("api-key-env"))
        assert code == 1 and err.startswith(f"bedside: error: {flag}: expects the NAME of an environment variable")
        assert pasted not in out + err and pasted[:12] not in out + err and "1BAD" not in err
    assert not (tmp_path / "s").exists()


def test_a_provider_s_error_text_and_a_model_name_reach_the_terminal_with_controls_visible(tmp_path: Path) -> None:
    payload = "\x1b[2J\x1b]0;PWNED\x07\x9b31m\u202e"

    def hostile(body: dict[str, Any]) -> tuple:
        if body["model"].startswith("judge"):
            return completion(judge_reply(body))
        return error(400, f"rejected {payload} here")

    with Recorder(hostile) as rec:
        code, out, err = bedside("run", "--answer-model", f"ans{payload}", "--judge-model", "judge",
                                 "--run-id", "hostile", "--base-url", rec.base_url, "--api-key-env", "PATH",
                                 "--judge-base-url", rec.base_url, "--judge-api-key-env", "PATH",
                                 "--store", tmp_path / "store", "--limit", "1", "--progress", "plain")
    assert code == 3, err
    assert "rejected \\x1b[2J\\x1b]0;PWNED\\x07\\x9b31m\\u202e here" in out + err  # said, made visible
    for text in (out, err):
        assert not any(c in text for c in "\x1b\x07\x9b\u202e"), text
