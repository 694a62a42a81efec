"""Reference result files as answer samples: several files of one model are one run (file i -> sample i), and
a run with several samples exports one reference file per sample."""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path

import polars as pl
import pyarrow as pa

from toolkit import protocol
from toolkit.dataset import Dataset
from toolkit.reference._checks import checker
from toolkit.reference._export import export_reference, export_text, summary_path
from toolkit.reference._read import CHUNK_BYTES, Disagreement, ImportReport, now_iso, printable
from toolkit.reference._stream import FileRows, check_scores, iter_result_rows
from toolkit.selection import JudgeSelection, RunData, read_runs
from toolkit.store import Store, StoreError
from toolkit.tables import constant

# The models every file of one run must share: samples graded by different judges would not be one run's
# scores (the summary scores the run's judge only).
SAME = ("answer_model", "judge_model")


def _with_sample(tables: dict[str, pa.Table], sample: int, offset: int) -> dict[str, pa.Table]:
    """A file's store rows as sample ``sample``, their seq (the file's line) after the earlier files' lines."""
    import pyarrow.compute as pc

    out = {}
    for table, frame in tables.items():
        at = frame.schema.get_field_index("sample")
        frame = frame.set_column(at, "sample", constant(sample, frame.num_rows, pa.int32()))
        if "seq" in frame.column_names:
            at = frame.schema.get_field_index("seq")
            frame = frame.set_column(at, "seq", pc.add(frame.column("seq"), constant(offset, frame.num_rows, pa.int64())))
        out[table] = frame
    return out


def _distinct(paths: list[Path]) -> None:
    """ValueError when one file is named twice (another spelling of its path, a link to it): its answers would
    read as two samples that never differ (answer variance 0, worst-at-k flat)."""
    seen: dict[tuple[int, int], Path] = {}
    for path in paths:
        try:
            info = path.stat()
        except OSError:
            continue  # the reader names a missing or unreadable file
        key = (info.st_dev, info.st_ino)
        if key in seen:
            raise ValueError(f"{printable(str(path))}: --as-samples: the file {printable(str(seen[key]))} is given "
                             "twice: each sample must be a file of its own answers")
        seen[key] = path


def import_samples(store: Store, paths: list[str | Path], dataset: Dataset, run_id: str, replace: bool = False,
                   chunk_bytes: int = CHUNK_BYTES) -> ImportReport:
    """Import files as ONE run whose sample i is file i, in the order given; all or nothing (ImportError_
    naming the file, ValueError when the files are not of one answer and judge model, StoreError)."""
    paths = [Path(p) for p in paths]
    if len(paths) < 2:
        raise ValueError(f"--as-samples: needs two or more result files (got {len(paths)})")
    _distinct(paths)
    run_id = store.run_id_for(run_id)
    check = checker(dataset)
    files: list[FileRows] = []
    with ExitStack() as lock:
        lock.enter_context(store.lock(run_id))
        pending = store.begin(run_id)
        try:
            if pending.current is not None and not replace:
                raise StoreError(f"{store.root}: run {run_id!r} exists (choose another --run-id or pass --replace)")
            offset = 0
            for sample, path in enumerate(paths):
                rows = FileRows(path, run_id, check)
                for number, row, size in iter_result_rows(path, rows.parse_problems):
                    rows.add(number, row, size)
                    if rows.buffered_bytes >= chunk_bytes and not rows.failed:
                        pending.add(_with_sample(rows.take(), sample, offset))
                        check_scores([rows], dataset.rubric_items)
                rows.finish(f"{dataset.source} (sha256 {dataset.sha256[:12]})")
                pending.add(_with_sample(rows.take(), sample, offset))
                check_scores([rows], dataset.rubric_items)
                for name in SAME:
                    first, this = files[0].seen.get(name) if files else None, rows.seen.get(name)
                    if files and first != this:
                        raise ValueError(f"{printable(str(path))}: --as-samples: {name} {this!r} differs from "
                                         f"{first!r} of {printable(str(paths[0]))}: the samples of a run are "
                                         "one model's answers, judged by one judge")
                files.append(rows)
                offset += rows.rows
            settings = {"rows": sum(f.rows for f in files), "skipped_rows": sum(f.rows - f.kept for f in files),
                        "dataset": str(Path(dataset.source).resolve()), "samples": len(files),
                        "source_files": [str(p) for p in paths]}
            efforts = set().union(*(f.efforts for f in files))
            run_row = {
                "run_id": run_id, "answer_model": files[0].seen.get("answer_model"),
                "judge_model": files[0].seen.get("judge_model"), "protocol_version": protocol.PROTOCOL_VERSION,
                "dataset_sha256": dataset.sha256, "source": "imported", "source_file": str(paths[0]),
                "answer_reasoning_effort": next(iter(efforts)) if len(efforts) == 1 else None,
                "created_at": now_iso(), "settings": json.dumps(settings),
            }
            store.write_dataset(dataset)
            replaced = pending.current is not None
            pending.commit(run_row, {"at": run_row["created_at"], "kind": "import", "source_file": str(paths[0]),
                                     "replace": replace, "settings": settings}, replace=replace)
        except BaseException:
            pending.abandon()
            raise
    completed = set.intersection(*(f.completed for f in files))
    return ImportReport(run_id, sum(f.rows for f in files), len(completed), sum(f.error_rows for f in files),
                        sum(f.rows - f.kept for f in files),
                        [Disagreement(*d, file=f.path) for f in files for d in f.disagreements],
                        _coverage(run_id, [f.completed for f in files]), replaced=replaced)


def _coverage(run_id: str, completed: list[set[str]]) -> tuple[str, ...]:
    """A warning when the files completed different cases: those cases have fewer answers than the others."""
    every, union = set.intersection(*completed), set().union(*completed)
    if every == union:
        return ()
    return (f"run {run_id!r}: {len(every)} of {len(union)} cases completed in every file; the others have fewer "
            f"answers (completed per file: {', '.join(str(len(c)) for c in completed)}): a case's score is the "
            "mean of its answers, and worst-at-k and pass^k at k count only cases with k answers",)


def sample_path(out: Path, sample: int) -> Path:
    """The reference file of one sample: ``<out>.sample<i>.jsonl`` (``.jsonl`` kept last)."""
    if out.name.endswith(".jsonl"):
        return out.with_name(f"{out.name[: -len('.jsonl')]}.sample{sample}.jsonl")
    return out.with_name(f"{out.name}.sample{sample}")


def _one_sample(data: RunData, sample: int) -> RunData:
    keep = pl.col("sample") == sample
    return RunData(data.runs, data.answers.filter(keep), data.judgments.filter(keep), data.decisions.filter(keep),
                   data.cases, data.rubric_items)


def export_samples(store: Store, run_id: str, out: str | Path,
                   selection: JudgeSelection = JudgeSelection(passes=(1,))) -> list[tuple[Path, Path]]:
    """Export a run in the reference format: one file and summary (``export_reference``) for a run asked once,
    one per sample (``sample_path``) for a run with several, every file written before any is renamed."""
    out = Path(out)
    data = read_runs(store, [run_id])
    samples = sorted(set(data.answers["sample"]) | set(data.judgments["sample"]))
    if len(samples) <= 1:
        return [export_reference(store, run_id, out, selection, data=data)]
    texts = [(sample_path(out, k), *export_text(_one_sample(data, k), run_id, sample_path(out, k), selection))
             for k in samples]
    written: list[tuple[Path, Path]] = []
    temps: list[tuple[Path, Path]] = []
    try:
        for path, rows, summary in texts:
            path.parent.mkdir(parents=True, exist_ok=True)
            for final, text in ((path, rows), (summary_path(path), summary)):
                tmp = final.with_name(final.name + ".tmp")
                tmp.write_text(text, encoding="utf-8")
                temps.append((tmp, final))
        for tmp, final in temps:
            tmp.replace(final)
        written = [(path, summary_path(path)) for path, _, _ in texts]
    finally:
        for tmp, _ in temps:
            tmp.unlink(missing_ok=True)
    return written
