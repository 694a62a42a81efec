"""A 500-case panel for benchmarks: the 250 public cases plus a variant of each (prompt suffixed,
ids recomputed), so every benchmark has 50 cases like the full BedsideBench."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from toolkit.dataset import item_id_for, load_dataset

VARIANT_SUFFIX = "\n\n(Variant B)"


def build_panel(shared_root: Path, out_dir: Path) -> Path:
    """Write the panel as a JSONL case file in ``out_dir`` and return its path."""
    public = load_dataset(shared_root)
    cases = []
    by_benchmark: dict[str, list[dict]] = {}
    for case in public.raw_cases:
        by_benchmark.setdefault(case["benchmark"], []).append(case)
    for benchmark, members in by_benchmark.items():
        variants = []
        for case in members:
            prompt = case["prompt"] + VARIANT_SUFFIX
            variants.append({
                **case,
                "case_id": hashlib.md5(f"{case['case_id']}-variant-b".encode()).hexdigest(),
                "prompt": prompt,
                "rubric_items": [{**item, "item_id": item_id_for(prompt, i)} for i, item in enumerate(case["rubric_items"])],
            })
        cases += members + variants
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "panel500.jsonl"
    path.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases), encoding="utf-8")
    return path


def shared_root() -> Path:
    root = Path(__file__).resolve().parents[3] / "shared" / "bedside-bench"
    if not (root / "registry.json").is_file():
        raise SystemExit(f"the public split is needed at {root}")
    return root
