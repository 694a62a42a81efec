"""The worst-at-k figure draws the budget's numbers, in the house palette's order and colours."""

from __future__ import annotations

import numpy as np
import polars as pl

from tests.variance_sim import frame, planted
from toolkit import figures
from toolkit.analysis.paired import ResampleSettings
from toolkit.analysis.variance import VarianceOptions, variance_budget


def test_worst_at_k_curves_are_the_budgets_rows_in_palette_order(tmp_path) -> None:
    scores, _ = planted(np.random.default_rng(5), 3, 2, 30, 4, 2)
    budget = variance_budget(frame(np.clip(scores, 0.0, 1.0)), VarianceOptions(resamples=ResampleSettings(samples=300)))
    palette = figures.palette_for(["2", "0", "1"])
    data = figures.worst_at_k_data(budget, palette)
    assert data["run_id"].unique(maintain_order=True).to_list() == ["2", "0", "1"]
    overall = budget.worst_at_k.filter(pl.col("benchmark") == "overall")
    assert data.height == overall.height == 12
    joined = data.join(overall, on=["run_id", "k"])
    assert (joined["value"] == joined["value_right"]).all()
    fig = figures.worst_at_k(budget, palette=palette, twin=data)
    ax = fig.axes[0]
    lines = [line for line in ax.get_lines() if line.get_label() in {"0", "1", "2"}]
    assert [line.get_color().lower() for line in lines] == [palette[r].lower() for r in ("2", "0", "1")]
    assert np.allclose(lines[0].get_ydata(), data.filter(pl.col("run_id") == "2")["value"].to_numpy())
    figures.save_png(fig, tmp_path / "worst_at_k.png")
    assert figures.png_bytes(figures.worst_at_k(budget, palette=palette)) == (tmp_path / "worst_at_k.png").read_bytes()
