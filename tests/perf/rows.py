"""One line format for every figure a tests/perf script measures against a target.

Every script in tests/perf/ ends by printing one ROW line per figure it checks (besides any detail
lines of its own), so tests/perf/run_all.py can collect them into the table the README's measured
section is updated from. Use it like this (any other engineer writing a perf script: please do):

    from tests.perf.rows import row
    row("bedside --version, cold", f"{wall:.2f} s wall, {cpu:.2f} s CPU", "<= 0.3 s", wall <= 0.3)

which prints

    ROW bedside --version, cold | 0.21 s wall, 0.20 s CPU | target <= 0.3 s | PASS

The fields are separated by " | " (so no field may contain it); the verdict is PASS or FAIL.
`parse_rows` reads them back out of a script's output.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

PREFIX = "ROW "
SEP = " | "


@dataclass(frozen=True)
class Row:
    what: str
    figure: str
    target: str
    ok: bool

    def line(self) -> str:
        return f"{PREFIX}{self.what}{SEP}{self.figure}{SEP}target {self.target}{SEP}{'PASS' if self.ok else 'FAIL'}"


def row(what: str, figure: str, target: str, ok: bool) -> Row:
    """Print one ROW line (flushed at once: run_all reads it from a pipe) and return it."""
    for field in (what, figure, target):
        if SEP.strip() in field or "\n" in field:
            raise ValueError(f"a row field may not hold '|' or a newline: {field!r}")
    r = Row(what, figure, target, bool(ok))
    print(r.line(), flush=True)
    sys.stdout.flush()
    return r


def parse_rows(text: str) -> list[Row]:
    """The ROW lines of a script's output, in order (other lines are ignored)."""
    out = []
    for line in text.splitlines():
        if not line.startswith(PREFIX):
            continue
        parts = line[len(PREFIX):].split(SEP)
        if len(parts) != 4 or not parts[2].startswith("target ") or parts[3] not in ("PASS", "FAIL"):
            continue
        out.append(Row(parts[0], parts[1], parts[2][len("target "):], parts[3] == "PASS"))
    return out
