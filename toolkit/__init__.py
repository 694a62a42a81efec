"""bedside: collect, score and analyse BedsideBench evaluations.

The public API. Names are imported lazily, so ``import toolkit`` stays cheap and
a notebook pays only for what it uses.

Not for clinical use: scores evaluate AI systems; they are not medical advice.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # dataset
    "Dataset": "toolkit.dataset",
    "DatasetError": "toolkit.dataset",
    "load_dataset": "toolkit.dataset",
    "validate_dataset": "toolkit.dataset",
    # store
    "Store": "toolkit.store",
    "StoreError": "toolkit.store",
    "default_store_path": "toolkit.store",
    "connect": "toolkit.sql",
    "write_database": "toolkit.sql",
    "query": "toolkit.sql",
    # scoring and summaries
    "pass_scores": "toolkit.scoring",
    "case_scores": "toolkit.scoring",
    "JudgeSelection": "toolkit.selection",
    "read_runs": "toolkit.selection",
    "per_case": "toolkit.selection",
    "per_sample": "toolkit.selection",
    "pass_level_scores": "toolkit.selection",
    "sample_scores": "toolkit.scoring",
    "BootstrapSettings": "toolkit.bootstrap",
    "reference_intervals": "toolkit.bootstrap",
    "SummaryOptions": "toolkit.summary",
    "summarize": "toolkit.summary",
    # reference interop
    "import_reference": "toolkit.reference",
    "import_many": "toolkit.reference",
    "export_reference": "toolkit.reference",
    "import_samples": "toolkit.reference",
    "export_samples": "toolkit.reference",
    "audit_file": "toolkit.reference",
    "AuditReport": "toolkit.reference",
    # collection (these import the openai SDK, heavy, on first use)
    "evaluate": "toolkit.collect.api",
    "rejudge": "toolkit.collect.api",
    "plan_evaluation": "toolkit.collect.api",
    "plan_rejudge": "toolkit.collect.api",
    "run_demo": "toolkit.collect.demo",
    # analyses
    "compare": "toolkit.analysis",
    "CompareOptions": "toolkit.analysis",
    "analyse_items": "toolkit.analysis",
    "ItemOptions": "toolkit.analysis",
    "harms": "toolkit.analysis",
    "HarmOptions": "toolkit.analysis",
    "judge_agreement": "toolkit.analysis",
    "AgreementOptions": "toolkit.analysis",
    "judge_noise": "toolkit.analysis",
    "NoiseOptions": "toolkit.analysis",
    "plan_power": "toolkit.analysis",
    "plan_design": "toolkit.analysis",
    "calibrate": "toolkit.analysis",
    "plan_labels": "toolkit.analysis",
    "PhysicianOptions": "toolkit.analysis",
    "PhysicianCheck": "toolkit.analysis",
    "variance_components": "toolkit.analysis.variance",
    "variance_budget": "toolkit.analysis.variance",
    "VarianceOptions": "toolkit.analysis.variance",
    # the comparison report
    "write_report": "toolkit.report",
    "ReportOptions": "toolkit.report",
    "ReportPaths": "toolkit.report",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'toolkit' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
