"""Reference-runner interop: import its append-only JSONL result files (one or many), export ours in its format.

An import streams: a file is read and checked line by line (``toolkit.reference._stream``) and its rows go
to the store a chunk at a time, all under one write id that stays invisible until the run's single runs
commit; a file with a bad row anywhere (its last line, say) ends with no runs commit and its rows swept.
A bulk import puts the rows of several small files into one data commit per table, and the new runs they
make into one runs commit (a bad file is refused alone, before it: the others' runs stand).
"""

from __future__ import annotations

import datetime as dt
import glob
import json
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.score_tables import store_scores
from toolkit.sql import follow_commits
from toolkit import protocol
from toolkit.dataset import Dataset, Problem
from toolkit.inputs import MiB
from toolkit.reference._checks import checker
from toolkit.reference._stream import FileRows, ImportError_, check_scores, iter_result_rows
from toolkit.store import Store, StoreError
from toolkit.store.maintenance import compact_runs_table

follow_commits()  # registered `bedside db` files follow this process's commits
store_scores()  # each commit stores its run's score tables with its rows

CHUNK_BYTES = 32 * MiB  # lines of a file held as rows before they go to the store in one data commit
BATCH_FILES = 100  # small files whose rows share one data commit per table (and new runs one runs commit)


@dataclass(frozen=True)
class Disagreement:
    line: int
    case_id: str
    file_score: float
    recomputed: float
    file: Path | None = None  # the file of the line, when a run came from several


@dataclass(frozen=True)
class ImportReport:
    run_id: str
    rows: int
    completed_cases: int
    error_rows: int
    skipped_rows: int  # rows of cases outside the dataset (the reference ignores them too)
    disagreements: list[Disagreement] = field(default_factory=list)
    warnings: tuple[str, ...] = ()  # what the numbers of the run rest on that a reader should know
    replaced: bool = False  # the run existed and --replace swapped its rows for the file's


@dataclass(frozen=True)
class ImportFailure:
    path: Path
    message: str  # one line, starting with the file's path
    exists: bool = False  # the file's run is in the store already (and --replace was not given)


class ImportInterrupted(KeyboardInterrupt):
    """Ctrl-C during an import: ``done``, (file, report) of the files whose runs were committed before it (a
    batch being committed ends as it would), in file order; no other file left anything visible."""

    def __init__(self, done: list[tuple[Path, ImportReport]]):
        super().__init__()
        self.done = done


class RunExists(StoreError):
    """A file's run is in the store already and ``--replace`` was not given."""


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat()


def import_reference(store: Store, path: str | Path, dataset: Dataset, run_id: str | None = None,
                     replace: bool = False, chunk_bytes: int = CHUNK_BYTES) -> ImportReport:
    """Load a reference result file into the store as one run; all-or-nothing (ImportError_ naming the
    file and field, StoreError, ...: no runs commit, nothing visible)."""
    path = Path(path)
    result = _Importer(store, dataset, replace, chunk_bytes).run([(path, run_id)])[0]
    if isinstance(result, BaseException):
        raise result
    return result


def import_many(store: Store, paths: list[str | Path], dataset: Dataset, replace: bool = False,
                run_id: str | None = None, chunk_bytes: int = CHUNK_BYTES) -> list[ImportReport | ImportFailure]:
    """One run (one runs commit) per file, in order; a bad file becomes an ImportFailure and the
    others go on (their commits stand). ``run_id`` names the run of a single file only."""
    if run_id is not None and len(paths) > 1:
        raise ValueError(f"--run-id: names one run but {len(paths)} files were given (drop it: each run is named "
                         "after its file)")
    jobs = [(Path(p), run_id) for p in paths]
    out: list[ImportReport | ImportFailure] = []
    with store.batch():  # subscribers (registered `bedside db` files) told once at the end, not once per file
        results = _Importer(store, dataset, replace, chunk_bytes).run(jobs)
    for (path, _), result in zip(jobs, results):
        if isinstance(result, BaseException):
            line = (str(result).splitlines() or [type(result).__name__])[0]
            line, shown = printable(line), printable(str(path))
            result = ImportFailure(path, line if line.startswith(shown) else f"{shown}: {line}",
                                   isinstance(result, RunExists))
        out.append(result)
    return out


def result_files(args: list[str]) -> list[Path]:
    """The files a bulk import reads: a directory gives its *.jsonl (sorted; a *.summary.json is not a
    result file), a pattern that is not itself a file is expanded here (quoted, the shell left it)."""
    files: list[Path] = []
    for arg in args:
        path = Path(arg)
        if path.is_dir():
            # every entry named *.jsonl, also a broken link, a FIFO or a folder: each then fails with its own line
            found = sorted(path.glob("*.jsonl"))
            what = "no *.jsonl result file in this directory"
        elif not path.exists() and any(c in arg for c in "*?["):
            found = sorted(Path(p) for p in glob.glob(arg) if not p.endswith(".summary.json"))
            what = "no result file matches this pattern"
        else:
            found, what = [path], ""
        if not found:
            raise ImportError_([Problem(arg, "file", what)])
        files += found
    return files


def printable(text: str) -> str:
    """Text with the undecodable bytes of a file name (surrogate escapes) shown as ``\\xff``: printable."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _run_id(store: Store, path: Path, run_id: str | None) -> str:
    """The run a file is imported as: ``run_id`` (``--run-id``), else the file's name without ``.jsonl``;
    checked by the store's one rule for run ids (StoreError, one line)."""
    if run_id is not None:
        return store.run_id_for(run_id)
    return store.run_id_for(path.stem, f"{printable(str(path))}: run id from the file name")


_FAILURES = (ValueError, OSError, StoreError)  # a file's own failure (ImportError_ is a ValueError)


@dataclass
class _Ready:
    """A file read to its end without a problem: its run's write begun (under the run's lock), its last
    rows buffered, its runs commit to come."""
    index: int
    rows: FileRows
    pending: Any  # toolkit.store.transaction.Transaction
    lock: ExitStack
    tables: dict[str, Any]


class _Importer:
    def __init__(self, store: Store, dataset: Dataset, replace: bool, chunk_bytes: int):
        self.store, self.dataset, self.replace, self.chunk_bytes = store, dataset, replace, chunk_bytes
        self.checker = checker(dataset)
        self.ready: list[_Ready] = []
        self.ready_bytes = 0
        self.results: list[Any] = []
        self.dataset_written = False
        self.committer: ThreadPoolExecutor | None = None
        self.flying: tuple[list[_Ready], Future] | None = None  # the batch being committed

    def run(self, jobs: list[tuple[Path, str | None]]) -> list[ImportReport | BaseException]:
        self.results = [None] * len(jobs)
        try:
            self._run(jobs)
        except KeyboardInterrupt:  # the runs committed before it stand: the caller says which
            raise ImportInterrupted([(path, r) for (path, _), r in zip(jobs, self.results)
                                     if isinstance(r, ImportReport)]) from None
        return self.results

    def _run(self, jobs: list[tuple[Path, str | None]]) -> None:
        claimed: dict[str, Path] = {}  # run id -> the file of this import that names it first
        # The next files are read while the last batch commits, in a thread: its Parquet encoding, scoring and
        # Delta writes leave the interpreter free much of the time. One batch in flight, in file order.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="bedside-import") as self.committer:
            try:
                for index, (path, given) in enumerate(jobs):
                    try:
                        run_id = _run_id(self.store, path, given)
                    except StoreError as error:
                        self.results[index] = error
                        continue
                    if run_id in claimed:  # the later file would replace (or fail on) the run the first made
                        self.results[index] = StoreError(
                            f"names run {run_id!r}, as {printable(str(claimed[run_id]))} does in this import: one "
                            "run per file (import it alone, or rename it)")
                        continue
                    claimed[run_id] = path
                    try:
                        ready = self._read(index, path, run_id)
                    except _FAILURES as error:
                        self.results[index] = error
                        continue
                    self.ready.append(ready)
                    self.ready_bytes += ready.rows.buffered_bytes
                    if self.ready_bytes >= self.chunk_bytes or len(self.ready) >= BATCH_FILES:
                        self._flush()
                self._flush()
                self._drain()
            finally:  # an interrupt or an out-of-memory error: no run half-made, no lock kept
                try:
                    self._drain()  # the batch in flight ends as it would: committed, or its rows swept
                finally:
                    for ready in self.ready:
                        ready.pending.abandon()
                        ready.lock.close()

    def _flush(self) -> None:
        """Commit the ready files' rows in the committer thread, once the batch before them is committed."""
        batch, self.ready, self.ready_bytes = self.ready, [], 0
        self._drain()
        if batch:
            self.flying = (batch, self.committer.submit(self._commit, batch))

    def _drain(self) -> None:
        """Wait for the batch in flight (its error, an out-of-memory one say, raised here)."""
        if self.flying is not None:
            future, self.flying = self.flying[1], None
            future.result()

    def _begin(self, run_id: str, lock: ExitStack) -> tuple[Any, StoreError | None]:
        """Lock the run and begin its write; (None, the reason) when it cannot be written (another writer,
        an existing run without --replace), to be told once the file is known to be valid."""
        try:
            lock.enter_context(self.store.lock(run_id))
            pending = self.store.begin(run_id)
        except StoreError as error:
            lock.close()
            return None, error
        if pending.current is not None and not self.replace:
            pending.abandon()
            lock.close()
            return None, RunExists(f"{self.store.root}: run {run_id!r} exists (choose another --run-id or pass --replace)")
        return pending, None

    def _read(self, index: int, path: Path, run_id: str) -> _Ready:
        rows = FileRows(path, run_id, self.checker)
        lock = ExitStack()
        pending, blocked = None, None
        try:
            for number, row, size in iter_result_rows(path, rows.parse_problems):
                rows.add(number, row, size)
                if rows.buffered_bytes >= self.chunk_bytes and not rows.failed:
                    if pending is None and blocked is None:
                        pending, blocked = self._begin(run_id, lock)
                    if pending is not None:
                        tables = rows.take()
                        check_scores([rows], self.dataset.rubric_items)
                        pending.add(tables)
                    else:
                        rows.drop()
            rows.finish(f"{self.dataset.source} (sha256 {self.dataset.sha256[:12]})")
            if pending is None and blocked is None:
                pending, blocked = self._begin(run_id, lock)
            if blocked is not None:
                raise blocked
            return _Ready(index, rows, pending, lock, rows.take())
        except BaseException:
            if pending is not None:
                pending.abandon()
            lock.close()
            raise

    def _commit(self, ready: list[_Ready]) -> None:
        """The files' rows in one data commit per table, then their runs commits (the new runs' in one)."""
        try:
            try:
                check_scores([r.rows for r in ready], self.dataset.rubric_items)
                self.store.add_rows([(r.pending, r.tables) for r in ready])
            except _FAILURES as error:  # a full disk, say: none of these files became a run
                for r in ready:
                    self.results[r.index] = error
                    r.pending.abandon()
                return
            new = [r for r in ready if r.pending.current is None]
            if len(new) > 1:
                self._finish_new(new)
            for r in ready:
                if self.results[r.index] is not None:  # made in the new runs' commit (or refused with them)
                    continue
                try:
                    self.results[r.index] = self._finish(r)
                except _FAILURES as error:
                    self.results[r.index] = error
                    r.pending.abandon()
                r.lock.close()
        except BaseException:  # an interrupt: the files not yet committed leave nothing visible behind
            for r in ready:
                if self.results[r.index] is None:
                    r.pending.abandon()
            raise
        finally:
            for r in ready:
                r.lock.close()
        compact_runs_table(self.store)  # a runs commit a file: a bulk import keeps the table (read each commit) small

    def _finish_new(self, ready: list[_Ready]) -> None:
        """New runs in ONE runs commit (their scores computed together): each file a run, all or none."""
        made = [self._run_row(r) for r in ready]
        try:
            self._write_dataset()
            self.store.commit_new_runs([(r.pending, run_row, step) for r, (run_row, step) in zip(ready, made)])
        except _FAILURES as error:  # a full disk, say: none of these files became a run
            for r in ready:
                self.results[r.index] = error
                r.pending.abandon()
            return
        for r in ready:
            self.results[r.index] = _report(r.rows)

    def _finish(self, ready: _Ready) -> ImportReport:
        run_row, step = self._run_row(ready)
        self._write_dataset()
        # The runs commit: the file's rows (in as many data commits as it took) become the run, a replace
        # swapping the old rows out in that same commit; a failure before it leaves the old run as it was.
        replaced = ready.pending.current is not None
        ready.pending.commit(run_row, step, replace=self.replace)
        return _report(ready.rows, replaced)

    def _write_dataset(self) -> None:
        if not self.dataset_written:
            self.store.write_dataset(self.dataset)
            self.dataset_written = True

    def _run_row(self, ready: _Ready) -> tuple[dict, dict]:
        """The runs row of the file's run and the step its commit records."""
        rows, path = ready.rows, ready.rows.path
        settings = {"rows": rows.rows, "skipped_rows": rows.rows - rows.kept,
                    "dataset": str(Path(self.dataset.source).resolve())}  # names the digest in reports
        run_row = {
            "run_id": rows.run_id, "answer_model": rows.seen.get("answer_model"),
            "judge_model": rows.seen.get("judge_model"), "protocol_version": protocol.PROTOCOL_VERSION,
            "dataset_sha256": self.dataset.sha256, "source": "imported", "source_file": str(path),
            "answer_reasoning_effort": next(iter(rows.efforts)) if len(rows.efforts) == 1 else None,
            "created_at": now_iso(), "settings": json.dumps(settings),
        }
        step = {"at": run_row["created_at"], "kind": "import", "source_file": str(path), "replace": self.replace,
                "settings": settings}
        return run_row, step


def _report(rows: FileRows, replaced: bool = False) -> ImportReport:
    return ImportReport(rows.run_id, rows.rows, len(rows.completed), rows.error_rows, rows.rows - rows.kept,
                        [Disagreement(*d) for d in rows.disagreements], replaced=replaced)
