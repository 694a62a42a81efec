"""Where a store lies and how a run id becomes one safe path segment."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import unicodedata
from pathlib import Path

from toolkit.store.disk import check_space
from toolkit.store.errors import StoreError
from toolkit.store.location import ObjectPath, parse

_SAFE = re.compile(r"[A-Za-z0-9_\-]")
_MAX_SEGMENT = 120


def default_store_path() -> Path | ObjectPath:
    """Where a command without ``--store`` reads and writes: ``$BEDSIDE_STORE`` (a folder or an ``s3://``
    URL), else ``./data/results`` relative to the current directory (never inside the installed package)."""
    chosen = os.environ.get("BEDSIDE_STORE")
    return parse(chosen) if chosen else Path.cwd() / "data" / "results"


def safe_segment(run_id: str) -> str:
    """A run id as one path segment: only [A-Za-z0-9_-] and %XX escapes; never '.', '..' or a slash.

    Distinct ids give distinct segments (the encoding is injective); very long ids are cut and
    suffixed with a digest of the whole id. The segment is also what the store's SQL predicates
    name a run by, so they never quote user text.
    """
    if not run_id:
        raise StoreError("run id must not be empty")
    encoded = "".join(ch if _SAFE.match(ch) else "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
                      for ch in run_id)
    if len(encoded) > _MAX_SEGMENT:
        encoded = f"{encoded[:80]}~{hashlib.sha256(run_id.encode('utf-8', 'surrogatepass')).hexdigest()[:32]}"
    return encoded


def part_of(run_id: str) -> str:
    """A run's partition value: its safe segment with '.' for '%' (injective still: segments hold no '.'),
    so Delta's own escaping of '%' does not double up in the directory names."""
    return safe_segment(run_id).replace("%", ".")


def some_of(ids: list[str], shown: int = 10) -> str:
    """The first ``shown`` ids and how many more: a store of a thousand runs must not fill an error line."""
    more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
    return (", ".join(ids[:shown]) or "none") + more


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat()


# -- run ids ---------------------------------------------------------------------------------------------

# Characters a run id may not hold: they print as nothing, move the cursor, or reorder a label's text.
_BIDI = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}
# Characters that show as nothing, so two ids that differ by one look the same (ZWJ and ZWNJ stay: emoji
# sequences and some scripts need them).
_INVISIBLE = {0x00AD, 0x034F, 0x180E, 0x200B, 0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0xFEFF}


def normal_run_id(run_id: str) -> str:
    """A run id as stored and looked up: Unicode NFC, so that two spellings of "café" are one run."""
    return unicodedata.normalize("NFC", run_id)


def new_run_id(run_id: str, what: str = "run id") -> str:
    """A run id a new run (import, collection, rename) may take, NFC-normalised; StoreError (one line)
    for an empty or blank id, spaces at its ends, a control, bidi-override or non-UTF-8 character."""
    shown = repr(run_id)
    if not run_id.strip():
        raise StoreError(f"{what} {shown}: must not be empty or blank")
    if run_id != run_id.strip():
        raise StoreError(f"{what} {shown}: must not begin or end with a space")
    for ch in run_id:
        code = ord(ch)
        if code < 0x20 or 0x7F <= code <= 0x9F:
            raise StoreError(f"{what} {shown}: holds a control character (U+{code:04X})")
        if code in _BIDI:
            raise StoreError(f"{what} {shown}: holds a bidirectional-text control (U+{code:04X}), which reorders "
                             "how it is shown")
        if code in _INVISIBLE:
            raise StoreError(f"{what} {shown}: holds an invisible character (U+{code:04X}), so it would look like "
                             "another id")
        if 0xD800 <= code <= 0xDFFF:
            raise StoreError(f"{what} {shown}: is not UTF-8 (a file name's bytes?)")
    return normal_run_id(run_id)


# -- the store's folder ----------------------------------------------------------------------------------

MARKER = ".bedside-store"  # written when a store is created: what makes a folder a store
# 2: runs hold stored score tables, which an earlier bedside (format 1) would leave stale; 3: rows carry an
# answer ``sample``, whose samples an earlier bedside would take for one answer's repeated rows.
FORMAT = 3
MARKER_TEXT = f"bedside-store {FORMAT}\n"
_OWN = frozenset({"answers", "judgments", "decisions", "runs", "cases", "rubric_items", "pass_scores",
                  "sample_scores", "case_scores", "benchmark_scores", "reliability_scores", "run_summary", ".locks",
                  "journal", ".databases.json", "reviews", "human_labels", MARKER})
_CHECKED: set[str] = set()  # store folders this process found marked (a marker is never taken away)
_OLDER: set[str] = set()  # marked stores of an earlier format: raised to FORMAT by their first write
_UNMARKED: set[str] = set()  # stores of earlier versions (a runs table, no marker) this process read


def _is_store_folder(root: Path) -> bool:
    """Whether a folder with no marker may be a store: it holds a table of one (a store made before markers
    existed), or nothing but the store's own entries (none at all: a new store)."""
    names = os.listdir(root)
    if any(os.path.isdir(root / n / "_delta_log") for n in names if n in _OWN):
        return True
    # a racing creator's marker being written (``_write_marker``) is the store's own too
    return all(n in _OWN or n.startswith((".trash-", f".{MARKER}.")) for n in names)


def _marked(root: Path) -> bool:
    key = str(root)
    if key in _CHECKED:
        return True
    try:
        text = (root / MARKER).read_bytes()[:100].decode("utf-8", "replace")
    except FileNotFoundError:
        return False
    except IsADirectoryError:
        text = ""
    kind, _, version = text.strip().partition(" ")
    if kind != "bedside-store" or not version.isdigit():
        raise StoreError(f"{root / MARKER}: not a bedside store marker; the folder is not a store")
    if int(version) > FORMAT:
        raise StoreError(f"{root}: a store of a newer bedside (format {version}); upgrade bedside to use it")
    if int(version) < FORMAT:
        _OLDER.add(key)
    _CHECKED.add(key)
    return True


def check_store_folder(root: Path) -> None:
    """For reading: StoreError (one line) when ``root`` is there but is not a store; nothing is written."""
    if isinstance(root, ObjectPath):
        return _check_remote(root)
    if str(root) in _UNMARKED or not os.path.lexists(root) or _marked(root):
        return
    if not root.is_dir():
        raise StoreError(f"{root}: not a folder, so not a store")
    if (root / "runs" / "_delta_log").is_dir():  # a store made before markers: stays one (marked when written)
        _UNMARKED.add(str(root))
        return
    if not _is_store_folder(root):
        raise StoreError(f"{root}: not a bedside store (it holds other files and no {MARKER}); "
                         "give a store folder, or an empty or new one to create a store")


def claim_store_folder(root: Path) -> None:
    """For writing: make ``root`` a store (a new or empty folder) or mark one made before markers existed;
    StoreError (one line) naming any other folder, which is left as it is."""
    if str(root) in _CHECKED and str(root) not in _OLDER:
        return
    if isinstance(root, ObjectPath):
        return _claim_remote(root)
    _UNMARKED.discard(str(root))
    check_store_folder(root)
    if _marked(root):
        if str(root) in _OLDER:  # its first write: from now on an earlier bedside refuses the store
            with check_space(root):
                _write_marker(root, replace=True)
            _OLDER.discard(str(root))
        return
    with check_space(root):
        root.mkdir(parents=True, exist_ok=True)
        _write_marker(root, replace=False)
    _marked(root)


def _write_marker(root: Path, replace: bool) -> None:
    """The marker of this format, written whole: a new store's by a link (a racing creator's marker
    stands), an older format's raised by a rename over it."""
    temp = root / f".{MARKER}.{os.getpid()}.tmp"
    temp.write_text(MARKER_TEXT, encoding="utf-8")
    try:
        if replace:
            os.replace(temp, root / MARKER)
        else:
            os.link(temp, root / MARKER)
    except FileExistsError:
        pass
    finally:
        temp.unlink(missing_ok=True)


# -- a store under an object-store prefix ----------------------------------------------------------------

def _check_remote(root: ObjectPath) -> None:
    """As ``check_store_folder``, for an ``s3://`` prefix: marked, empty, or holding only a store's entries."""
    if str(root) in _CHECKED:
        return
    try:
        text = (root / MARKER).read_bytes()[:100].decode("utf-8", "replace")
    except FileNotFoundError:
        names = [p.name for p in root.listing()]
        bucket = ObjectPath("s3://" + root.key.split("/", 1)[0])
        if not names and not bucket.exists():  # else read as an empty store: say what is missing instead
            raise StoreError(f"{root}: no bucket {bucket.name!r} there (check the URL, AWS_ENDPOINT_URL and "
                             "AWS_REGION)") from None
        if names and not all(n in _OWN for n in names):
            raise StoreError(f"{root}: not a bedside store (it holds other objects and no {MARKER}); "
                             "give a store's prefix, or an empty or new one to create a store") from None
        return
    except OSError as error:
        from toolkit.store.location import first_line

        raise StoreError(f"{root}: cannot read the store ({first_line(error)})") from None
    kind, _, version = text.strip().partition(" ")
    if kind != "bedside-store" or not version.isdigit():
        raise StoreError(f"{root / MARKER}: not a bedside store marker; the prefix is not a store")
    if int(version) != FORMAT:
        raise StoreError(f"{root}: a store of {'a newer' if int(version) > FORMAT else 'an older'} bedside "
                         f"(format {version}); use bedside of format {version}")
    _CHECKED.add(str(root))


def _claim_remote(root: ObjectPath) -> None:
    """As ``claim_store_folder``, for an ``s3://`` prefix: its marker is written when missing (two creators
    racing write the same bytes)."""
    _check_remote(root)
    if str(root) not in _CHECKED:
        try:
            (root / MARKER).write_bytes(MARKER_TEXT.encode())
        except OSError as error:
            from toolkit.store.location import first_line

            raise StoreError(f"{root}: cannot write to the store ({first_line(error)})") from None
        _CHECKED.add(str(root))
