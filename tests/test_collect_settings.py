"""Endpoint resolution from the provider table, keys from the environment, and dry-run arithmetic."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit import protocol
from toolkit.collect.estimate import estimate
from toolkit.collect.judge import CaseToJudge
from toolkit.collect.plan import StoredAnswer, StoredWork, make_plan
from toolkit.prices import parse_prices
from toolkit.collect.settings import (CollectSettings, Endpoint, SettingsError, load_providers, resolve_endpoint,
                                      resolve_judge_endpoint)


@pytest.fixture(scope="module")
def table():
    return load_providers()


def test_prefixes_choose_the_provider_and_the_key_variables(table) -> None:
    fireworks = resolve_endpoint(table, "accounts/fireworks/models/x", None, None)
    assert fireworks.base_url.startswith("https://") and fireworks.key_envs == ("FIREWORKS_API_KEY",)
    openai = resolve_endpoint(table, "gpt-5.6-sol", None, None)
    assert openai.base_url == "https://api.openai.com/v1"
    assert openai.key_envs == ("OPENAI_API_KEY", "OPENAI_ACCESS_TOKEN")
    custom = resolve_endpoint(table, "gpt-5.6-sol", "http://127.0.0.1:9/v1/", "MY_KEY")
    assert custom == Endpoint("custom", "http://127.0.0.1:9/v1", ("MY_KEY",))
    # an explicit URL never receives a key it was not given
    assert resolve_endpoint(table, "gpt-5.6-sol", "http://127.0.0.1:9/v1", None).key_envs == ()
    with pytest.raises(SettingsError, match="needs --base-url URL .*bedside sim serve"):
        resolve_endpoint(table, "sim/strong", None, None)


def test_the_judge_shares_the_answer_endpoint_only_within_a_named_provider(table) -> None:
    sim = resolve_endpoint(table, "sim/strong", "http://127.0.0.1:9/v1", None)
    assert resolve_judge_endpoint(table, "sim/strong", sim, "sim/judge", None, None) == sim
    local = resolve_endpoint(table, "llama", "http://127.0.0.1:9/v1", None)
    judge = resolve_judge_endpoint(table, "llama", local, "gpt-5.6-sol", None, None)
    assert judge.base_url == "https://api.openai.com/v1"  # an unprefixed judge goes to OpenAI, not the local URL
    explicit = resolve_judge_endpoint(table, "llama", local, "judge", "http://127.0.0.1:8/v1", "J_KEY")
    assert explicit == Endpoint("custom", "http://127.0.0.1:8/v1", ("J_KEY",))


def test_first_set_variable_is_the_key(monkeypatch) -> None:
    endpoint = Endpoint("openai", "https://x/v1", ("A_KEY", "B_KEY"))
    monkeypatch.delenv("A_KEY", raising=False)
    monkeypatch.setenv("B_KEY", "b-secret")
    assert endpoint.api_key() == "b-secret" and endpoint.key_env() == "B_KEY"
    assert "b-secret" not in str(endpoint.describe())
    monkeypatch.delenv("B_KEY")
    with pytest.raises(SettingsError, match=r"\$A_KEY or \$B_KEY.*--judge-api-key-env"):
        endpoint.api_key("judge")
    assert Endpoint("sim", "http://x/v1", ()).api_key() == "no-key"


def test_bad_provider_files_are_reported_with_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "p.toml"
    bad.write_text('[default]\nbase_url = "https://x"\n[[provider]]\nname = "x"\n')
    with pytest.raises(SettingsError, match=r"p.toml: provider\[0\].prefix"):
        load_providers(bad)
    bad.write_text('[default]\nbase_url = "https://x"\n[prices.models."m"]\nprompt = 1\ncompletion = 1\n')
    with pytest.raises(SettingsError, match=r"p.toml: \[prices\] is no longer read here.*--prices FILE"):
        load_providers(bad)
    bad.write_text("not toml [")
    with pytest.raises(SettingsError, match="invalid TOML"):
        load_providers(bad)


def test_estimate_counts_characters_over_four_and_prices_per_million(tmp_path: Path) -> None:
    priced = tmp_path / "p.toml"
    priced.write_text('[default]\nbase_url = "https://x"\n[estimate]\nanswer_completion_tokens = 100\n'
                      'judge_completion_tokens_per_item = 10\n')
    table = load_providers(priced)
    prices = parse_prices({"batch_discount": 0.5, "models": {"a": {"input": 1.0, "output": 2.0}}})
    cases = [CaseToJudge("c1", "p" * 400, (("c1_0", 1.0, "x"), ("c1_1", -1.0, "y"))),
             CaseToJudge("c2", "q" * 800, (("c2_0", 2.0, "z"),))]
    work = StoredWork(answers={("c2", 0): StoredAnswer(1, "an answer", 1.0)})
    endpoint = Endpoint("x", "https://x", ())
    settings = CollectSettings("r", "a", "j", endpoint, endpoint, judge_passes=(1, 2))
    plan = make_plan(cases, work, "j", (1, 2), answer=True)
    answer, judge = estimate(plan, work, settings, table, prices=prices)
    assert answer.calls == 1 and answer.prompt_tokens == (len(protocol.ANSWER_SYSTEM) + 400) // 4
    assert answer.completion_tokens == 100
    assert answer.cost_usd == pytest.approx((answer.prompt_tokens * 1.0 + 100 * 2.0) / 1e6)
    assert judge.calls == 4 and judge.completion_tokens == 2 * (2 * 10) + 2 * 10 and judge.cost_usd is None
    placeholder = sum(len(m["content"]) for m in cases[0].messages("x" * 400)) // 4
    stored = sum(len(m["content"]) for m in cases[1].messages("an answer")) // 4
    assert judge.prompt_tokens == 2 * placeholder + 2 * stored
    batch = estimate(plan, work, settings, table, batch=True, prices=prices)[0]
    assert batch.cost_usd == pytest.approx(answer.cost_usd * 0.5)


def test_a_base_url_with_control_characters_is_one_line_before_the_store_is_touched(tmp_path: Path) -> None:
    """httpx refuses such a URL only at the first call: by then the run had made a store folder, and the
    refusal was an internal error. The URL is shown with its controls escaped."""
    import socket
    import subprocess
    import sys
    with socket.socket() as listener:  # reachable, so the connection check passes it
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        st = tmp_path / "store"
        for flag in ("--base-url", "--judge-base-url"):  # one of the two URLs hostile (an option is given once)
            urls = {name: f"http://127.0.0.1:{port}/v1" + "\x1b[2J" * (name == flag)
                    for name in ("--base-url", "--judge-base-url")}
            done = subprocess.run([sys.executable, "-m", "toolkit", "run", "--answer-model", "m", "--judge-model", "j",
                                   *(word for pair in urls.items() for word in pair), "--api-key-env", "K",
                                   "--judge-api-key-env", "K", "--smoke", "--timeout", "1", "--max-retries", "1",
                                   "--store", str(st)],
                                  capture_output=True, text=True, env={**__import__("os").environ, "K": "x"}, timeout=60)
            lines = done.stderr.strip().splitlines()
            assert done.returncode != 0 and len(lines) == 1, done.stderr
            assert flag in lines[0] and "\\x1b[2J" in lines[0] and "\x1b" not in done.stderr, lines
            assert not st.exists()
    with pytest.raises(SettingsError, match="control character"):
        resolve_endpoint(load_providers(), "m", "http://127.0.0.1:9/v1\u202e", None)
