"""The options every command shares: one rule and one message for --samples and --seed, the same in the
Python API; the report's regenerate line read back by ``bedside report`` gives the same options."""

from __future__ import annotations

import shlex

import pytest

from tests.test_cli_process import bedside_process

SEED_MESSAGE = "bedside: error: seed must be an int >= 0, got -1\n"
RESAMPLING_COMMANDS = ("summary", "compare", "items", "harms", "agreement", "variance", "report")


@pytest.mark.parametrize("command", RESAMPLING_COMMANDS)
def test_a_negative_seed_is_refused_by_every_command_with_one_line(command, demo_store, tmp_path) -> None:
    out = tmp_path / "report"
    extra = ["--out", str(out)] if command == "report" else []
    done = bedside_process([command, "--all", "--store", str(demo_store), "--seed", "-1", *extra])
    assert (done.returncode, done.stderr, done.stdout) == (1, SEED_MESSAGE, "")
    assert not out.exists()


@pytest.mark.parametrize("command", RESAMPLING_COMMANDS)
@pytest.mark.parametrize("samples", ["0", "1000001"])
def test_a_sample_count_out_of_range_is_refused_by_every_command_with_one_line(command, samples, demo_store,
                                                                               tmp_path) -> None:
    out = tmp_path / "report"
    extra = ["--out", str(out)] if command == "report" else []
    done = bedside_process([command, "--all", "--store", str(demo_store), "--samples", samples, *extra])
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"bedside: error: samples must be an int in [1, 1000000], got {samples}\n"
    assert not out.exists()


def test_the_python_api_gives_the_same_message() -> None:
    from toolkit.analysis import ResampleSettings
    from toolkit.bootstrap import BootstrapSettings
    from toolkit.report import ReportOptions

    for make in (lambda: ResampleSettings(samples=100, seed=-1), lambda: BootstrapSettings(seed=-1),
                 lambda: ReportOptions(seed=-1)):
        with pytest.raises(ValueError) as refused:
            make()
        assert f"bedside: error: {refused.value}\n" == SEED_MESSAGE
    for make in (lambda: ResampleSettings(samples=0), lambda: BootstrapSettings(samples=0),
                 lambda: ReportOptions(samples=True)):
        with pytest.raises(ValueError, match=r"^samples must be an int in \[1, 1000000\], got "):
            make()


def test_option_records_are_built_by_keyword() -> None:
    from toolkit.analysis import (AgreementOptions, CompareOptions, HarmOptions, ItemOptions, NoiseOptions,
                                  ResampleSettings)
    from toolkit.bootstrap import BootstrapSettings
    from toolkit.report import ReportOptions
    from toolkit.summary import SummaryOptions

    for record in (CompareOptions, ItemOptions, HarmOptions, AgreementOptions, NoiseOptions, ReportOptions,
                   SummaryOptions, BootstrapSettings):
        with pytest.raises(TypeError):
            record(ResampleSettings())


def test_the_regenerate_line_gives_back_the_same_options(demo_store, tmp_path, monkeypatch) -> None:
    import toolkit.report
    from toolkit.cli import main
    from toolkit.report import ReportOptions
    from toolkit.report.options import regenerate_command
    from toolkit.selection import JudgeSelection
    from toolkit.store import Store

    written = []
    monkeypatch.setattr(toolkit.report, "write_report", lambda *args: written.append(args) or pytest.skip("unreached"))
    store = Store.open(demo_store)
    options = ReportOptions(baseline="sim/weak", title="It's 'quoted'", samples=300, seed=5, allow_mixed=True,
                            selection=JudgeSelection(judge="j/1", passes=(1, 3)), dataset=str(tmp_path / "ds"))
    for runs, opts in ((["sim/strong", "sim/weak"], options), (None, ReportOptions())):
        words = shlex.split(regenerate_command(runs, store, opts))
        assert words[:2] == ["bedside", "report"]
        written.clear()
        monkeypatch.setattr(toolkit.report, "write_report", lambda *args: written.append(args) or _Paths())
        assert main(words[1:]) == 0
        (_store, run_ids, _out, got), = written
        assert (run_ids, got) == (runs, opts)


class _Paths:
    html = markdown = "x"
    figures: list = []
    tables: list = []
    timings: dict = {}


def test_a_numpy_integer_is_a_seed_and_a_sample_count_like_an_int() -> None:
    """A seed from ``np.random.default_rng().integers(...)`` or a loop over ``np.arange`` is taken, stored as
    an int (JSON and notes print it as one); a bool, a float or a negative number is refused."""
    import numpy as np

    from toolkit.analysis.paired import ResampleSettings
    from toolkit.bootstrap import BootstrapSettings
    from toolkit.report import ReportOptions

    for make in (ResampleSettings, lambda samples, seed: BootstrapSettings(samples=samples, seed=seed),
                 lambda samples, seed: ReportOptions(samples=samples, seed=seed)):
        made = make(samples=np.int64(200), seed=np.uint32(7))
        assert (made.samples, made.seed) == (200, 7) and type(made.seed) is int and type(made.samples) is int
        for bad in (True, 1.0, np.float64(3.0), -1, np.int64(-1)):
            with pytest.raises(ValueError, match="seed must be an int >= 0"):
                make(samples=200, seed=bad)


def test_a_refusal_uses_no_deprecated_click_api(tmp_path, capsys) -> None:
    """A command's one-line refusal went through click.get_text_stream, deprecated in click 8.2 (a
    DeprecationWarning in every test run that reached it): no click DeprecationWarning on that path."""
    import warnings

    from toolkit.cli import main

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        code = main(["plan", "--target-mdd", "0.05", "--components", str(tmp_path / "missing.json")])
    assert code == 1 and capsys.readouterr().err.startswith("bedside: error: ")
