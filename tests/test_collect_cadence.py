"""How often a collection checkpoints and ticks its progress view: the two are separate, so a long
checkpoint interval (each checkpoint commits and re-scores the run) still leaves a live progress display."""

from __future__ import annotations

import io
from pathlib import Path

from toolkit.collect.judge import case_to_judge
from toolkit.collect.plan import ensure_run
from toolkit.collect.progress import PlainView
from toolkit.collect.runner import TICK_S, CollectJob, collect
from toolkit.collect.settings import CollectSettings, Endpoint
from toolkit.dataset import load_dataset
from toolkit.sim import SimConfig, SimServer
from toolkit.store import Store


def test_progress_ticks_between_checkpoints_and_a_short_run_commits_only_at_its_end(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    dataset = load_dataset(None)
    commits: list[str] = []
    real_commit = Store.commit_run

    def counted(self, run_id, tables=None, *args, **kwargs):
        if tables:  # a journal's rows (the runs row alone is ensure_run's)
            commits.append(run_id)
        return real_commit(self, run_id, tables, *args, **kwargs)

    monkeypatch.setattr(Store, "commit_run", counted)
    out = io.StringIO()
    # 16 calls of 0.25 s, two at a time: about 2 s of calls, twice the tick interval
    with SimServer(SimConfig(latency_ms=250, seed=3)) as sim:
        endpoint = Endpoint("sim", sim.base_url, ())
        settings = CollectSettings("r", "sim/strong", "sim/judge", endpoint, endpoint, concurrency=2,
                                   checkpoint_s=60.0)
        job = CollectJob(settings, tuple(case_to_judge(c) for c in dataset.raw_cases[:8]))
        [report] = collect(Store.open(tmp_path / "s"), [job], lambda t: PlainView(t, out, interval=0.0),
                           prepare=lambda s, j: ensure_run(s, j.settings, dataset.sha256))
    assert report.answers_ok == 8 and report.judgments_ok == 8
    assert TICK_S < 2.0
    lines = out.getvalue().splitlines()
    assert len(lines) >= 2, lines  # at least one tick while calls were in flight, then the last line
    assert lines[-1].startswith("r: 16/16 calls")
    assert commits == ["r"]  # one checkpoint, the last: the interval was never reached
