"""Analyses over stored runs: comparisons, rubric items, harms and judge agreement (polars in, polars out).

Modules: ``paired`` (shared-index bootstrap engine), ``matrix`` (aligned runs x cases scores),
``compare`` (the comparison of stored runs) over ``case_comparison`` (leaderboard, pairs, versus from
case scores), ``ranking`` (who is ranked, rank intervals, tie groups), ``pairs`` (paired differences),
``paired_t`` (their stratified t, and the runs' intervals), ``multiplicity`` (Holm, BH),
``wilcoxon`` and ``van_elteren`` (signed-rank p, plain and stratified),
``ratios`` (ratios of case sums with case-resampled intervals), ``items``, ``harms``,
``reliability`` (kappa, alpha) and ``agreement``, ``judge_noise`` (the gap the judge alone could make),
``planning`` (power and cases needed), ``design`` (cases, answers and judge passes at least cost),
``costs`` (what stored runs cost), ``runs`` (run facts, which runs are comparable), ``physicians`` (the judge
against physician labels, scores corrected by them) over ``physician_labels`` and ``physician_stats``.
"""

from toolkit.analysis.agreement import Agreement, AgreementOptions, judge_agreement
from toolkit.analysis.compare import (CaseComparison, Comparison, CompareOptions, compare, compare_cases,
                                      compare_data, compare_matrix, rank_intervals)
from toolkit.analysis.harms import HarmOptions, harm_cases, harms
from toolkit.analysis.judge_noise import JudgeNoise, NoiseOptions, judge_noise, rater_scores, within_variance
from toolkit.analysis.design import Components, DesignPlan, components_from_rows, plan_design
from toolkit.analysis.planning import (PowerPlan, cases_needed, detectable, plan_power, power, with_repeats,
                                       within_for_pair)
from toolkit.analysis.items import ItemAnalysis, ItemOptions, analyse_items, by_points, item_rates, item_summary
from toolkit.analysis.matrix import CaseMatrix, case_matrix, from_arrays
from toolkit.analysis.multiplicity import benjamini_hochberg, holm
from toolkit.analysis.paired import ResampleSettings, SharedResamples, draw_resamples, percentile_interval
from toolkit.analysis.paired_t import PairedT, paired_t
from toolkit.analysis.physicians import (PhysicianCheck, PhysicianOptions, calibrate, judge_vs_physicians,
                                         plan_labels)
from toolkit.analysis.pairs import pairwise
from toolkit.analysis.wilcoxon import wilcoxon_p
from toolkit.analysis.reliability import (category_counts, cohen_kappa, fleiss_kappa, krippendorff_alpha_nominal,
                                          percent_agreement)
from toolkit.analysis.runs import comparable_runs, run_facts

__all__ = [
    "Agreement", "AgreementOptions", "judge_agreement", "JudgeNoise", "NoiseOptions", "judge_noise",
    "rater_scores", "within_variance", "PowerPlan", "cases_needed", "detectable", "plan_power", "power",
    "with_repeats", "within_for_pair", "Components", "DesignPlan", "components_from_rows", "plan_design",
    "CaseComparison", "Comparison", "CompareOptions", "compare", "compare_cases", "compare_data", "compare_matrix",
    "rank_intervals", "HarmOptions", "harm_cases", "harms",
    "ItemAnalysis", "ItemOptions", "analyse_items", "by_points", "item_rates", "item_summary",
    "CaseMatrix", "case_matrix", "from_arrays", "benjamini_hochberg", "holm",
    "ResampleSettings", "SharedResamples", "draw_resamples", "percentile_interval", "PairedT", "paired_t",
    "PhysicianCheck", "PhysicianOptions", "calibrate", "judge_vs_physicians", "plan_labels",
    "pairwise", "wilcoxon_p", "category_counts", "cohen_kappa", "fleiss_kappa", "krippendorff_alpha_nominal",
    "percent_agreement", "comparable_runs", "run_facts",
]
