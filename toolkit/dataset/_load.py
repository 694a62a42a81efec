"""Load a BedsideBench dataset, validate it, and compute its digest.

A dataset is either a checkout in the upstream layout (``registry.json`` ->
``data/<benchmark>/manifest.json`` -> ``cases/<case_id>.json``) or a single
JSONL / JSON / Parquet file of case objects. Load order follows the reference
runner: panels in registry order, cases in manifest order, then unlisted
``split == "test"`` case files by sorted file name.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import polars as pl

from toolkit import protocol
from toolkit.inputs import (DATASET_FILE_LIMIT, InputError, field_path, inside, is_plain_name, open_regular,
                            parse_json, read_text, shorten)
from toolkit.dataset._frames import frames as _frames

if TYPE_CHECKING:
    import jsonschema_rs

PROJECT_ROOT = Path(__file__).resolve().parents[2]  # a source checkout's root (not used by installed wheels)


@cache
def resource_dir(package: str, checkout_folder: str, marker: str) -> Path:
    """A folder shipped inside the package: ``toolkit._sample`` is ``data/sample`` and ``toolkit._schemas``
    is ``schemas`` of the repository (mapped in setup.py), read through importlib.resources.

    The top-level folder of the checkout is used only when the resource package cannot be imported:
    running from a clone, or an editable install (whose finder cannot map a folder without
    ``__init__.py`` inside a regular package). ``marker`` is a file the folder holds.
    """
    from importlib import resources

    try:
        # joinpath of a file gives a real path for a plain or a namespace (MultiplexedPath) resource package
        found = Path(str(resources.files(package).joinpath(marker))).parent
    except ModuleNotFoundError:
        found = PROJECT_ROOT / checkout_folder
    if not (found / marker).is_file():
        raise DatasetError([Problem(str(found), marker, f"missing: the installed bedside package lacks its {package} "
                                    "resources (reinstall it)")])
    return found


def sample_dataset_path() -> Path:
    """The bundled sample dataset (a checkout in the upstream layout)."""
    return resource_dir("toolkit._sample", "data/sample", "registry.json")


def schema_path(method: str) -> Path:
    """The JSON Schema of a grading method's case objects."""
    name = f"case.{method}.schema.json"
    return resource_dir("toolkit._schemas", "schemas", name) / name


@dataclass(frozen=True)
class Problem:
    """One validation problem, located by file and field."""

    file: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.field}: {self.message}"


class DatasetError(ValueError):
    """A dataset failed to load or validate; ``problems`` lists every finding."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(f"{problems[0]}{more}")


@dataclass(frozen=True, eq=False)
class Dataset:
    """A loaded, validated dataset. ``cases`` and ``rubric_items`` follow ``toolkit.tables``."""

    source: Path
    raw_cases: tuple[dict[str, Any], ...] = field(repr=False)
    sha256: str
    cases: pl.DataFrame = field(repr=False)
    rubric_items: pl.DataFrame = field(repr=False)

    @property
    def benchmarks(self) -> dict[str, int]:
        """Case count per benchmark, in load order."""
        return dict(Counter(c["benchmark"] for c in self.raw_cases))

    def case(self, case_id: str) -> dict[str, Any]:
        return self._by_id()[case_id]

    @cache
    def _by_id(self) -> dict[str, dict[str, Any]]:
        return {c["case_id"]: c for c in self.raw_cases}

    def select(self, smoke: bool = False, limit: int | None = None,
               benchmarks: Iterable[str] | None = None) -> list[str]:
        """Case ids chosen like the reference: benchmark filter, then smoke (first case of each
        benchmark in load order), then the first ``limit``."""
        chosen = list(self.raw_cases)
        if benchmarks:
            wanted = set(benchmarks)
            unknown = wanted - set(self.benchmarks)
            if unknown:
                raise DatasetError([Problem(str(self.source), "benchmark", f"unknown benchmark(s): {', '.join(sorted(unknown))}")])
            chosen = [c for c in chosen if c["benchmark"] in wanted]
        if smoke:
            seen: set[str] = set()
            chosen = [c for c in chosen if not (c["benchmark"] in seen or seen.add(c["benchmark"]))]
        if limit is not None:
            chosen = chosen[:limit]
        return [c["case_id"] for c in chosen]


def digest(cases: Iterable[dict[str, Any]]) -> str:
    """``dataset_sha256`` exactly as the reference computes it: compact, key-sorted JSON of all case objects."""
    payload = json.dumps(list(cases), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def item_id_for(prompt: str, index: int) -> str:
    return f"{hashlib.md5(prompt.encode()).hexdigest()}_{index}"


def default_dataset_path() -> Path:
    env = os.environ.get("BEDSIDE_DATASET")
    return Path(env) if env else sample_dataset_path()


def load_dataset(path: str | os.PathLike[str] | None = None) -> Dataset:
    """Load and validate a checkout or case file; raise DatasetError listing every problem."""
    source = Path(path) if path is not None else default_dataset_path()
    problems: list[Problem] = []
    if source.is_dir():
        located, known = _load_checkout(source, problems)
    elif os.path.lexists(source):  # a file; a FIFO, device or dangling link gets its own line from the reader
        located, known = _load_case_file(source, problems), set(protocol.BENCHMARK_METHODS)
    else:
        raise DatasetError([Problem(str(source), "path", "no such dataset file or directory")])
    if not problems:
        _check_cases(located, known, problems)
    if problems:
        raise DatasetError(problems)
    raw = tuple(case for _, case in located)
    sha = digest(raw)
    return Dataset(source, raw, sha, *_frames(raw, sha))


def validate_dataset(path: str | os.PathLike[str] | None = None) -> list[Problem]:
    """Every problem found in a dataset (empty when it is valid)."""
    try:
        load_dataset(path)
    except DatasetError as error:
        return error.problems
    return []


# -- reading ---------------------------------------------------------------

Located = list[tuple[str, dict[str, Any]]]  # (where the case came from, case object)


def _read_json(path: Path, problems: list[Problem], root: Path | None = None) -> Any:
    """A checkout's JSON file, or None after adding a problem. ``root`` (resolved): the file must
    lie inside it once symlinks are resolved."""
    if root is not None and not inside(root, path):
        problems.append(Problem(str(path), "file", "resolves outside the dataset root (a symlink?); not read"))
        return None
    try:
        text = read_text(path, DATASET_FILE_LIMIT)
        if not text.strip():
            problems.append(Problem(str(path), "content", "empty file"))
            return None
        return parse_json(text, str(path), empty="case")
    except InputError as error:
        problems.append(Problem(error.file, error.field, error.message))
        return None


def _load_checkout(root: Path, problems: list[Problem]) -> tuple[Located, set[str]]:
    registry_path = root / "registry.json"
    if not os.path.lexists(registry_path):
        problems.append(Problem(str(root), "registry.json", "not a dataset checkout (registry.json missing)"))
        return [], set()
    real_root = root.resolve()
    registry = _read_json(registry_path, problems, real_root)
    if registry is None:
        return [], set()
    panels = registry.get("panels") if isinstance(registry, dict) else None
    if not isinstance(panels, list) or not panels:
        problems.append(Problem(str(registry_path), "panels", "must be a non-empty list"))
        return [], set()
    located: Located = []
    seen_panels: set[str] = set()
    for index, panel in enumerate(panels):
        where = f"panels[{index}]"
        if not isinstance(panel, dict) or not all(isinstance(panel.get(k), str) for k in ("id", "grading_method", "path")):
            problems.append(Problem(str(registry_path), where, "needs string id, grading_method and path"))
            continue
        name, method = panel["id"], panel["grading_method"]
        if name in seen_panels:
            problems.append(Problem(str(registry_path), f"{where}.id", f"duplicate benchmark {name!r}"))
        seen_panels.add(name)
        if method not in protocol.GRADING_METHODS:
            problems.append(Problem(str(registry_path), f"{where}.grading_method", f"unknown grading method {method!r}"))
        elif protocol.BENCHMARK_METHODS.get(name, method) != method:
            problems.append(Problem(str(registry_path), f"{where}.grading_method",
                                    f"{name} is graded by {protocol.BENCHMARK_METHODS[name]}, not {method}"))
        folder = root / panel["path"]
        if "\0" in panel["path"] or not inside(real_root, folder):
            problems.append(Problem(str(registry_path), f"{where}.path",
                                    f"{shorten(repr(panel['path']))} is outside the dataset root"))
            continue
        located += _load_panel(folder, name, method, problems, real_root)
    return located, seen_panels


def _load_panel(folder: Path, name: str, method: str, problems: list[Problem], root: Path) -> Located:
    manifest_path = folder / "manifest.json"
    manifest = _read_json(manifest_path, problems, root)
    if manifest is None:
        return []
    mf = str(manifest_path)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("case_ids"), list) \
            or not all(isinstance(c, str) for c in manifest["case_ids"]):
        problems.append(Problem(mf, "case_ids", "must be a list of case id strings"))
        return []
    for key, expected in (("benchmark", name), ("grading_method", method)):
        if key in manifest and manifest[key] != expected:
            problems.append(Problem(mf, key, f"{manifest[key]!r} does not match the registry's {expected!r}"))
    ids = manifest["case_ids"]
    if "case_count" in manifest and manifest["case_count"] != len(ids):
        problems.append(Problem(mf, "case_count", f"{manifest['case_count']} but case_ids lists {len(ids)}"))
    for dup in sorted(k for k, v in Counter(ids).items() if v > 1):
        problems.append(Problem(mf, "case_ids", f"case {dup} listed twice"))
    located: Located = []
    cases_dir = folder / "cases"
    for index, case_id in enumerate(ids):
        if not is_plain_name(case_id):  # a case id names a file in cases/, never a path
            problems.append(Problem(mf, f"case_ids[{index}]", f"{shorten(repr(case_id))} is not a plain file name"))
            continue
        path = cases_dir / f"{case_id}.json"
        if not os.path.lexists(path):
            problems.append(Problem(mf, "case_ids", f"case file {path} is missing"))
            continue
        located += _panel_case(path, name, method, problems, root)
    listed = set(ids)
    extra = sorted(p for p in cases_dir.glob("*.json") if p.stem not in listed) if cases_dir.is_dir() else []
    for path in extra:  # the reference adds unlisted held-out cases and ignores the rest
        case = _read_json(path, problems, root)
        if isinstance(case, dict) and case.get("split") == "test":
            located += _panel_case(path, name, method, problems, root, case)
    return located


def _panel_case(path: Path, name: str, method: str, problems: list[Problem], root: Path,
                case: Any = None) -> Located:
    case = _read_json(path, problems, root) if case is None else case
    if case is None:
        return []
    if not isinstance(case, dict):
        problems.append(Problem(str(path), "case", "must be a JSON object"))
        return []
    if case.get("case_id") not in (None, path.stem):
        problems.append(Problem(str(path), "case_id", f"{case['case_id']!r} does not match the file name"))
    if case.get("benchmark") not in (None, name):
        problems.append(Problem(str(path), "benchmark", f"{case['benchmark']!r} but the file is in panel {name!r}"))
    if case.get("grading_method") not in (None, method):
        problems.append(Problem(str(path), "grading_method", f"{case['grading_method']!r} but panel {name!r} uses {method!r}"))
    return [(str(path), case)]


def _load_case_file(path: Path, problems: list[Problem]) -> Located:
    try:
        if path.suffix == ".parquet":
            return _load_parquet(path, problems)
        text = read_text(path, DATASET_FILE_LIMIT)
        if not text.strip():
            problems.append(Problem(str(path), "content", "empty file"))
            return []
        if path.suffix == ".json":
            data = parse_json(text, str(path), empty="cases")
            data = data.get("cases") if isinstance(data, dict) else data
            if not isinstance(data, list):
                problems.append(Problem(str(path), "cases", "expected a list of case objects"))
                return []
            return [(f"{path} case {i + 1}", c) for i, c in enumerate(data)]
    except InputError as error:
        problems.append(Problem(error.file, error.field, error.message))
        return []
    located: Located = []
    for number, line in enumerate(text.split("\n"), start=1):  # LF only: U+2028 may sit raw in a string
        if not line.strip():
            continue
        try:
            located.append((f"{path}:{number}", parse_json(line, f"{path}:{number}", position="column {column}",
                                                           empty="case", invalid="line is not JSON")))
        except InputError as error:
            problems.append(Problem(error.file, error.field, error.message))
    return located


def _load_parquet(path: Path, problems: list[Problem]) -> Located:
    import pyarrow.parquet as pq

    with open_regular(path, DATASET_FILE_LIMIT) as handle:
        try:
            rows = pq.read_table(handle).to_pylist()
        except Exception as error:  # pyarrow raises several types for a damaged file
            problems.append(Problem(str(path), "file", f"unreadable Parquet: {shorten(str(error))}"))
            return []
    return [(f"{path} row {i + 1}", row) for i, row in enumerate(rows)]


# -- checking --------------------------------------------------------------

@cache
def _validator(method: str) -> jsonschema_rs.Draft202012Validator:
    import jsonschema_rs  # compiled: a dataset of 500 cases validates in milliseconds

    schema = json.loads(schema_path(method).read_text(encoding="utf-8"))
    return jsonschema_rs.Draft202012Validator(schema)


def _check_cases(located: Located, known: set[str], problems: list[Problem]) -> None:
    seen_cases: dict[str, str] = {}
    seen_items: dict[str, str] = {}
    if not located:
        problems.append(Problem("dataset", "cases", "no cases found"))
    for where, case in located:
        if not isinstance(case, dict):
            problems.append(Problem(where, "case", "must be a JSON object"))
            continue
        method = case.get("grading_method")
        if method not in protocol.GRADING_METHODS:
            problems.append(Problem(where, "grading_method", f"unknown grading method {method!r}"))
            continue
        errors = sorted(_validator(method).iter_errors(case), key=lambda e: list(e.instance_path))
        for error in errors:
            problems.append(Problem(where, field_path(error.instance_path, "case"), shorten(error.message)))
        if errors:
            continue
        benchmark = case["benchmark"]
        if benchmark not in known:
            problems.append(Problem(where, "benchmark", f"unknown benchmark {benchmark!r}"))
        elif protocol.BENCHMARK_METHODS.get(benchmark, method) != method:
            problems.append(Problem(where, "grading_method",
                                    f"{benchmark} is graded by {protocol.BENCHMARK_METHODS[benchmark]}, not {method}"))
        case_id = case["case_id"]
        if case_id in seen_cases:
            problems.append(Problem(where, "case_id", f"duplicate case {case_id} (also in {seen_cases[case_id]})"))
        seen_cases.setdefault(case_id, where)
        for index, item in enumerate(case["rubric_items"]):
            expected = item_id_for(case["prompt"], index)
            if item["item_id"] != expected:
                problems.append(Problem(where, f"rubric_items[{index}].item_id",
                                        f"{item['item_id']!r} should be {expected!r} (md5(prompt)_index)"))
            elif item["item_id"] in seen_items:
                problems.append(Problem(where, f"rubric_items[{index}].item_id",
                                        f"duplicate item id (also in {seen_items[item['item_id']]})"))
            seen_items.setdefault(item["item_id"], where)
        if method == protocol.POINTS_RUBRIC and not any(i["points"] > 0 for i in case["rubric_items"]):
            problems.append(Problem(where, "rubric_items", "a points_rubric case needs at least one positive item"))
