"""Per-case views: score distributions, score against answer length, score against tokens and latency."""

from __future__ import annotations

import numpy as np
import polars as pl
from matplotlib.axes import Axes
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from toolkit.figures.palette import Palette, completed, is_ranked_shading, rank_cmap, run_marker
from toolkit.figures.style import GREY, laid_out, new_figure, rows_height, short_labels, styled
from toolkit.selection import RunData

LEGEND_RUNS = 8  # up to this many runs get a legend; more are numbered or shown with a rank colour bar
PANEL_COLUMNS = 3


def _scored(cases: pl.DataFrame) -> pl.DataFrame:
    return cases.filter(pl.col("score").is_not_null() & pl.col("score").is_not_nan())


def run_order(cases: pl.DataFrame) -> list[str]:
    """Runs of a ``per_case`` frame best first by macro mean over benchmarks (ties by run id)."""
    means = _scored(cases).group_by("run_id", "benchmark").agg(pl.col("score").mean()).group_by("run_id").agg(
        pl.col("score").mean().alias("overall"))
    missing = sorted(set(cases["run_id"].unique().to_list()) - set(means["run_id"].to_list()))
    return means.sort(["overall", "run_id"], descending=[True, False])["run_id"].to_list() + missing


def _colours(cases: pl.DataFrame, palette: Palette | None) -> dict[str, str]:
    """The runs of ``cases`` in drawing order with their colours: the palette's, else best first by macro mean."""
    return completed(palette, run_order(cases) if palette is None else cases["run_id"].unique(maintain_order=True))


def _rank_bar(fig: Figure, axes, runs: list[str]) -> None:
    """With many runs: a colour bar from rank 1 (best, top) to the last run, instead of a legend."""
    from matplotlib.cm import ScalarMappable

    bar = fig.colorbar(ScalarMappable(Normalize(1, len(runs)), rank_cmap()), ax=axes, fraction=0.03, pad=0.02)
    bar.ax.invert_yaxis()
    bar.set_label("run rank on the leaderboard (1 = best)")


def _order(colours: dict[str, str]) -> dict[str, int]:
    return {r: i for i, r in enumerate(colours)}


def score_distributions_data(cases: pl.DataFrame, palette: Palette | None = None) -> pl.DataFrame:
    """ECDF points: run_id, benchmark, score, ecdf (share of the run's cases in the benchmark scoring
    at most ``score``), one row per scored case; runs in the palette's order (else best first), benchmarks
    alphabetical."""
    order = _order(_colours(cases, palette))
    scored = _scored(cases).select("run_id", "benchmark", "score").sort(
        pl.col("run_id").replace_strict(order, return_dtype=pl.Int64), "benchmark", "score")
    return scored.with_columns(
        ecdf=(pl.int_range(1, pl.len() + 1).over("run_id", "benchmark") / pl.len().over("run_id", "benchmark")))


@laid_out
def score_distributions(cases: pl.DataFrame, palette: Palette | None = None,
                        *, twin: pl.DataFrame | None = None) -> Figure:
    """One panel per benchmark: each run's empirical CDF of case scores (further right = better).

    Each run in its palette colour; up to 8 runs get a legend, more a rank colour bar. Cases without a
    score (NaN) are left out and counted in the title.
    """
    frame = score_distributions_data(cases, palette) if twin is None else twin
    if frame.is_empty():
        raise ValueError("score_distributions: no scored case in the frame")
    colours = _colours(cases, palette)
    runs = [r for r in colours if r in set(frame["run_id"].to_list())]
    labels = short_labels(runs)
    benchmarks = sorted(frame["benchmark"].unique().to_list())
    columns = min(PANEL_COLUMNS, len(benchmarks))
    rows = -(-len(benchmarks) // columns)
    dropped = cases.height - frame.height
    with styled():
        fig = new_figure(0.8 + 2.3 * rows)
        axes = np.atleast_1d(fig.subplots(rows, columns, sharex=True, sharey=True, squeeze=False)).ravel()
        for ax, bench in zip(axes, benchmarks):
            part = frame.filter(pl.col("benchmark") == bench)
            for k, run in enumerate(runs):
                mine = part.filter(pl.col("run_id") == run)
                if mine.height:
                    ax.ecdf(mine["score"].to_numpy(), color=colours[run], linewidth=1.6 if len(runs) <= 8 else 1.0,
                            linestyle=("-", "--", ":", "-.")[k % 4] if len(runs) <= LEGEND_RUNS else "-",
                            label=labels[run])
            ax.set_title(f"{bench.replace('_', ' ')} (n={part['score'].len() // max(part['run_id'].n_unique(), 1)})",
                         fontsize=10, fontweight="normal")
            ax.set_xlim(-0.02, 1.02)
            ax.set_ylim(0, 1.02)
            ax.grid(True)
        for ax in axes[len(benchmarks):]:
            ax.set_axis_off()
        for k, ax in enumerate(axes[:len(benchmarks)]):
            if k + columns >= len(benchmarks):  # nothing drawn below: this panel shows the x axis
                ax.xaxis.set_tick_params(labelbottom=True)
                ax.set_xlabel("case score")
            if ax.get_subplotspec().is_first_col():
                ax.set_ylabel("share of cases ≤ score")
        title = "Distribution of case scores per benchmark (empirical CDF)"
        if dropped:
            title += f"; {dropped} unscored case(s) left out"
        fig.suptitle(title)
        if len(runs) <= LEGEND_RUNS:
            fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=min(len(runs), 6))
        if is_ranked_shading(colours):
            _rank_bar(fig, axes.tolist(), runs)
    return fig


def answer_usage(data: RunData) -> pl.DataFrame:
    """run_id, case_id and the scored answers' characters (null when texts were not read), completion
    and prompt tokens and latency: the latest successful attempt of each answer sample, averaged over the
    case's samples (one answer's), and ``answers``, how many samples the case has (so K answers cost K times)."""
    answers = data.answers.filter(pl.col("error").is_null())
    if "answer" in answers.columns:
        answers = answers.filter(pl.col("answer").is_not_null())
    chars = pl.col("answer").str.len_chars().cast(pl.Int64) if "answer" in answers.columns else pl.lit(None, pl.Int64)
    keys = ["run_id", "case_id"] + (["sample"] if "sample" in answers.columns else [])
    latest = answers.sort(*keys, "attempt").group_by(keys, maintain_order=True).last()
    return latest.with_columns(chars.alias("characters")).group_by("run_id", "case_id", maintain_order=True).agg(
        *(pl.col(c).mean() for c in ("characters", "completion_tokens", "prompt_tokens", "latency_s")),
        pl.len().alias("answers"))


def length_bias_data(data: RunData, cases: pl.DataFrame, palette: Palette | None = None) -> pl.DataFrame:
    """One row per scored case with a length: run_id, benchmark, case_id, score, length and its unit
    ("characters" when answer texts were read, else "completion tokens"), and the run's
    within-benchmark rank correlation ``run_rho``: length and score ranked within each benchmark (as
    fractions), centred on the benchmark's mean rank, then correlated over the run's cases, so
    benchmarks that are both long and easy do not fake a bias (null when nothing varies)."""
    usage = answer_usage(data)
    unit = "characters" if usage["characters"].is_not_null().any() else "completion tokens"
    column = "characters" if unit == "characters" else "completion_tokens"
    joined = _scored(cases).select("run_id", "benchmark", "case_id", "score").join(
        usage.select("run_id", "case_id", pl.col(column).cast(pl.Float64).alias("length")), on=["run_id", "case_id"])
    joined = joined.filter(pl.col("length").is_not_null())
    if joined.is_empty():
        raise ValueError("length_bias: no scored case has an answer length (answer text or completion tokens)")
    within = ["run_id", "benchmark"]
    centred = [(pl.col(c).rank() / pl.len() - (pl.col(c).rank() / pl.len()).mean()).over(within).alias(f"_{c}")
               for c in ("length", "score")]
    sxx, syy = (pl.col("_length") ** 2).sum(), (pl.col("_score") ** 2).sum()
    rho = joined.with_columns(centred).group_by("run_id").agg(
        # Pooled within-benchmark correlation; null when length or score never varies within a benchmark.
        pl.when((sxx > 1e-12) & (syy > 1e-12)).then((pl.col("_length") * pl.col("_score")).sum() / (sxx * syy).sqrt())
        .alias("run_rho"))
    order = _order(_colours(cases, palette))
    return joined.join(rho, on="run_id", how="left").with_columns(
        unit=pl.lit(unit), run_rho=pl.col("run_rho").fill_nan(None)).sort(
        pl.col("run_id").replace_strict(order, default=len(order), return_dtype=pl.Int64), "benchmark", "case_id")


@laid_out
def length_bias(data: RunData, cases: pl.DataFrame, palette: Palette | None = None,
                *, twin: pl.DataFrame | None = None) -> Figure:
    """Case score against answer length (left) and each run's within-benchmark rank correlation (right).

    A positive correlation in most runs suggests the judge rewards length; it is an association,
    not proof (longer answers may also cover more items). Raises ValueError when no length exists or
    lengths never vary.
    """
    frame = length_bias_data(data, cases, palette) if twin is None else twin
    if frame["run_rho"].is_null().all():
        raise ValueError("length_bias: answer length or score never varies within a benchmark of any run "
                         "(e.g. simulated answers of one fixed text): nothing to relate")
    runs = frame["run_id"].unique(maintain_order=True).to_list()
    labels = short_labels(runs)
    colours = completed(palette, runs)
    unit = frame["unit"][0]
    with styled():
        fig = new_figure(max(4.5, rows_height(len(runs), base=1.6)))
        left, right = fig.subplots(1, 2, width_ratios=[1.6, 1])
        for k, run in enumerate(runs):
            mine = frame.filter(pl.col("run_id") == run)
            left.scatter(mine["length"], mine["score"], s=14, alpha=0.6, color=colours[run],
                         marker=run_marker(colours, run), linewidth=0, label=labels[run])
        left.set_xlabel(f"answer length ({unit})")
        left.set_ylabel("case score")
        left.set_ylim(-0.03, 1.03)
        left.grid(True)
        left.set_title("Score against answer length", loc="left")
        if len(runs) <= LEGEND_RUNS:
            left.legend(loc="lower right", markerscale=1.5)
        rho = frame.unique("run_id", maintain_order=True)["run_rho"].to_numpy().astype(float)
        y = np.arange(len(runs))
        right.axvline(0, color=GREY, linestyle="--", linewidth=1)
        right.hlines(y, 0, np.nan_to_num(rho), color=[colours[r] for r in runs], linewidth=3)
        right.scatter(rho, y, color=[colours[r] for r in runs], s=30, zorder=3)
        right.set_yticks(y, [labels[r] for r in runs])
        right.set_ylim(len(runs) - 0.5, -0.5)
        right.set_xlim(-1, 1)
        right.set_xlabel("rank correlation ρ of length\nand score, within benchmark")
        right.grid(axis="x")
        right.set_title("Length bias per run", loc="left")
    return fig


def cost_data(data: RunData, cases: pl.DataFrame, costs: pl.DataFrame | None = None,
              palette: Palette | None = None) -> pl.DataFrame:
    """Per run with token usage: macro mean score over its scored cases, mean prompt + completion tokens
    of the scored answers per case (all its samples), the completion part, median answer latency, cases
    counted, and with ``costs`` (``toolkit.analysis.costs.run_costs`` rows) ``usd_per_case``: the run's
    dollars (every answer and judge call) over the cases it called the answer model for, null where the run
    is not priced."""
    usage = answer_usage(data)
    joined = _scored(cases).select("run_id", "benchmark", "case_id", "score").join(
        usage, on=["run_id", "case_id"], how="left")
    tokens = (pl.col("prompt_tokens").fill_null(0) + pl.col("completion_tokens")) * pl.col("answers")
    per_run = joined.group_by("run_id").agg(
        tokens.mean().alias("tokens_per_case"),
        (pl.col("completion_tokens") * pl.col("answers")).mean().alias("completion_tokens_per_case"),
        pl.col("latency_s").median().alias("median_latency_s"), pl.col("completion_tokens").count().alias("cases_with_usage"))
    overall = joined.group_by("run_id", "benchmark").agg(pl.col("score").mean()).group_by("run_id").agg(
        pl.col("score").mean().alias("overall"))
    order = _order(_colours(cases, palette))
    out = overall.join(per_run, on="run_id").filter(pl.col("cases_with_usage") > 0).sort(
        pl.col("run_id").replace_strict(order, default=len(order), return_dtype=pl.Int64))
    if out.is_empty():
        raise ValueError("cost: no run has token usage (imported runs and simulated stores carry none)")
    called = data.answers.group_by("run_id").agg(pl.col("case_id").n_unique().alias("_called"))
    usd = (costs.select("run_id", "usd") if costs is not None else
           pl.DataFrame(schema={"run_id": pl.String, "usd": pl.Float64}))
    out = out.join(called, on="run_id", how="left", maintain_order="left").join(
        usd, on="run_id", how="left", maintain_order="left").with_columns(
        usd_per_case=pl.col("usd") / pl.col("_called"))
    return out.select("run_id", "overall", "tokens_per_case", "completion_tokens_per_case", "median_latency_s",
                      "cases_with_usage", "usd_per_case")


@laid_out
def cost(data: RunData, cases: pl.DataFrame, costs: pl.DataFrame | None = None, palette: Palette | None = None,
         *, twin: pl.DataFrame | None = None) -> Figure:
    """Overall score against cost per case (left) and median answer latency (right), one point per run.

    The cost is in dollars (every answer and judge call, ``costs``) when every run drawn is priced and not all
    are free, else in tokens: the scored answer's prompt + completion tokens (reasoning tokens are part of the
    completion; the judge's are not counted). Never both on one axis. Raises ValueError when no run has usage.
    """
    frame = cost_data(data, cases, costs, palette) if twin is None else twin
    runs = frame["run_id"].to_list()
    colours = completed(palette, runs)
    labels = short_labels(runs, width=22 if len(runs) > LEGEND_RUNS else 28)  # three legend columns fit at 22
    has_latency = frame["median_latency_s"].is_not_null().any()
    with styled():
        fig = new_figure(4.6 if len(runs) <= LEGEND_RUNS else 4.6 + 0.17 * len(runs))
        axes = fig.subplots(1, 2 if has_latency else 1, sharey=True, squeeze=False)[0]
        # all free (the simulated provider) would put every run at $0: tokens say more
        priced = frame["usd_per_case"].is_not_null().all() and (frame["usd_per_case"] > 0).any()
        panels = [(axes[0], "usd_per_case", "USD per case (answer and judge calls, retries included)") if priced
                  else (axes[0], "tokens_per_case", "prompt + completion tokens per case")]
        if has_latency:
            panels.append((axes[1], "median_latency_s", "median answer latency (s)"))
        for ax, column, xlabel in panels:
            _labelled_points(ax, frame[column].to_numpy().astype(float), frame["overall"].to_numpy().astype(float),
                             runs, labels, colours)
            ax.set_xlabel(xlabel)
            ax.grid(True)
        axes[0].set_ylabel("overall score (macro mean)")
        fig.suptitle("Score against cost")
        if len(runs) > LEGEND_RUNS:
            handles = axes[0].collections
            fig.legend(handles, [f"{i + 1}  {labels[r]}" for i, r in enumerate(runs)], loc="outside lower center",
                       ncol=3, handlelength=0.8, columnspacing=1.0)
    return fig


def _labelled_points(ax: Axes, x: np.ndarray, y: np.ndarray, runs: list[str], names: dict[str, str],
                     colours: dict[str, str]) -> None:
    """One marker per run: with few runs named beside the point, with many numbered (legend below).

    Names of points in the right third of the panel go on their left, so they stay inside it.
    """
    labels = [names[r] for r in runs]
    many = len(labels) > LEGEND_RUNS
    finite = x[np.isfinite(x)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    for i, label in enumerate(labels):
        ax.scatter([x[i]], [y[i]], s=45, color=colours[runs[i]], marker=run_marker(colours, runs[i]), zorder=3,
                   edgecolor="#404040", linewidth=0.4, label=label)
        if np.isfinite(x[i]) and np.isfinite(y[i]):
            flip = not many and hi > lo and (x[i] - lo) / (hi - lo) > 0.66
            ax.annotate(str(i + 1) if many else label, (x[i], y[i]), xytext=(-5 if flip else 5, 4),
                        textcoords="offset points", ha="right" if flip else "left", fontsize=9)
    ax.margins(x=0.2, y=0.15)
