"""The store's tables and derived relations as DuckDB SQL, defined once.

``bedside sql`` / ``bs.connect`` (in memory) and ``bedside db`` (a database file) both run these
statements, and ``schemas/tables.md``'s data dictionary is generated from them. Only SQL that a plain
DuckDB runs (>= 1.3, for the ``lambda`` syntax; no extension; tests run the 1.5 shell on a file):
macros, views and one small table.

The numbers equal the toolkit's polars/Python ones bit for bit (tests/test_db.py checks):
- rubric sums run in rubric order (``list_reduce`` over an ordered list), as ``toolkit.scoring`` does;
- ``round(x, 4)`` is Python's: exact half-way cases are settled by an error-free product (Dekker split);
- the mean over passes is polars' (Kahan sum / n) and its sd polars' (Welford);
- benchmark and overall means are ``math.fsum(values) / n``: the values are cut into three integer
  limbs of 60 bits each (exact for values >= 2**-127), summed as HUGEINT and rounded to the nearest
  double once (half to even), which is what ``fsum`` returns. That holds for sums of 0 or >= 2**-60;
  smaller positive sums and negative ones (neither occurs for scores: a non-zero score is >= 1e-4 or a
  ratio of rubric points) fall back to plain double arithmetic.
Bootstrap intervals are not SQL: ``run_intervals`` is a table the writer fills, stamped with each
run's ``updated_at``; the views show an interval only while the run is unchanged since then.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolkit import protocol
from toolkit.sql._derived_views import DERIVED, View
from toolkit.tables import TABLES

# Storage columns the views leave out: ``runs.write_ids`` is the store's commit point, not data.
HIDDEN = {"runs": ("write_ids",)}
_DUCK_TYPES = {"string": "VARCHAR", "int32": "INTEGER", "int64": "BIGINT", "double": "DOUBLE", "bool": "BOOLEAN"}
_LIMB = "1152921504606846976"  # 2**60
_MASK = "1152921504606846975::HUGEINT"

MACROS = (
    # Python's round(x, 4): numpy's route (round the scaled value) away from half-way points, else an
    # exact comparison of 20000*x with the odd integer 2N+1 (Dekker split: both products are exact).
    "CREATE OR REPLACE MACRO bs_round4_exact(x, n) AS (CASE "
    " WHEN 20000.0 * ((134217729.0 * x) - ((134217729.0 * x) - x)) - (2.0 * n + 1.0)"
    "      > -(20000.0 * (x - ((134217729.0 * x) - ((134217729.0 * x) - x)))) THEN n + 1.0"
    " WHEN 20000.0 * ((134217729.0 * x) - ((134217729.0 * x) - x)) - (2.0 * n + 1.0)"
    "      < -(20000.0 * (x - ((134217729.0 * x) - ((134217729.0 * x) - x)))) THEN n"
    " WHEN n % 2 = 0 THEN n ELSE n + 1.0 END)",
    "CREATE OR REPLACE MACRO bs_round4(x) AS (CASE WHEN x IS NULL OR isnan(x) THEN NULL"
    " WHEN NOT isfinite(x) THEN x"
    " WHEN abs(x * 10000.0 - floor(x * 10000.0) - 0.5) >= 1e-6 THEN round_even(x * 10000.0, 0) / 10000.0"
    " ELSE bs_round4_exact(x, floor(x * 10000.0)) / 10000.0 END)",
    # left-to-right sum, as the reference's Python loop adds (the lists are never empty: one per group)
    "CREATE OR REPLACE MACRO bs_seq_sum(l) AS list_reduce(l, lambda a, b: a + b)",
    # polars' mean and sd of a group, nulls skipped: Kahan sum / n, and Welford's update. The first value
    # starts the state ({s: x0, c: 0} and {n: 1, m: x0, d: 0} are what one step from zero gives), since
    # DuckDB 1.x's list_reduce takes no initial value of another type than the list's.
    "CREATE OR REPLACE MACRO bs_present(l) AS list_filter(l, lambda v: v IS NOT NULL)",
    "CREATE OR REPLACE MACRO bs_kahan_mean(l) AS (CASE WHEN len(bs_present(l)) > 0 THEN"
    " list_reduce(list_transform(bs_present(l), lambda v: struct_pack(s := v, c := 0.0::DOUBLE)),"
    " lambda a, b: struct_pack(s := a.s + (b.s - a.c), c := ((a.s + (b.s - a.c)) - a.s) - (b.s - a.c))).s"
    " / len(bs_present(l)) END)",
    "CREATE OR REPLACE MACRO bs_welford_sd(l) AS (CASE WHEN len(bs_present(l)) > 1 THEN"
    " sqrt(list_reduce(list_transform(bs_present(l), lambda v: struct_pack(n := 1::BIGINT, m := v, d := 0.0::DOUBLE)),"
    " lambda a, b: struct_pack(n := a.n + 1, m := a.m + (b.m - a.m) / (a.n + 1),"
    " d := a.d + (b.m - a.m) * (b.m - (a.m + (b.m - a.m) / (a.n + 1))))).d / (len(bs_present(l)) - 1)) END)",
    # math.fsum: limb i of x (i = 0, 1, 2) is floor(frac(x * 2**(60 i)) * 2**60), exact for finite x
    f"CREATE OR REPLACE MACRO bs_limb0(x) AS floor(x * {_LIMB}.0)::HUGEINT",
    f"CREATE OR REPLACE MACRO bs_limb1(x) AS floor((x * {_LIMB}.0 - floor(x * {_LIMB}.0)) * {_LIMB}.0)::HUGEINT",
    f"CREATE OR REPLACE MACRO bs_limb2(x) AS floor(((x * {_LIMB}.0 - floor(x * {_LIMB}.0)) * {_LIMB}.0"
    f" - floor((x * {_LIMB}.0 - floor(x * {_LIMB}.0)) * {_LIMB}.0)) * {_LIMB}.0)::HUGEINT",
    # carries: value = h * 2**-60 + m * 2**-120 + l * 2**-180 with 0 <= m, l < 2**60
    f"CREATE OR REPLACE MACRO bs_limbs(h, m, l) AS {{'h': h + ((m + (l >> 60)) >> 60),"
    f" 'm': (m + (l >> 60)) & {_MASK}, 'l': l & {_MASK}}}",
    "CREATE OR REPLACE MACRO bs_bits(h) AS (CASE WHEN h <= 0 THEN 0 ELSE CAST(floor(log2(h::DOUBLE)) AS INTEGER) + 1"
    " - CASE WHEN (h >> (CAST(floor(log2(h::DOUBLE)) AS INTEGER))) = 0 THEN 1 ELSE 0 END"
    " + CASE WHEN (h >> (CAST(floor(log2(h::DOUBLE)) AS INTEGER) + 1)) > 0 THEN 1 ELSE 0 END END)",
    # q: the top 53 bits, rem/half: what is cut off and half its unit, sticky: anything below
    "CREATE OR REPLACE MACRO bs_round_bits(q, rem, half, sticky, e) AS"
    " (q + CASE WHEN rem > half OR (rem = half AND (sticky OR q % 2 = 1)) THEN 1 ELSE 0 END)::DOUBLE * pow(2.0, e)",
    "CREATE OR REPLACE MACRO bs_fsum_of(v, b) AS (CASE"
    " WHEN v.h <= 0 THEN v.h::DOUBLE * pow(2.0, -60) + v.m::DOUBLE * pow(2.0, -120) + v.l::DOUBLE * pow(2.0, -180)"
    " WHEN b >= 54 THEN bs_round_bits(v.h >> (b - 53), v.h & ((1::HUGEINT << (b - 53)) - 1),"
    "  1::HUGEINT << (b - 54), v.m > 0 OR v.l > 0, b - 53 - 60)"
    " ELSE bs_round_bits((v.h << (53 - b)) | (v.m >> (60 - (53 - b))), v.m & ((1::HUGEINT << (60 - (53 - b))) - 1),"
    "  1::HUGEINT << (59 - (53 - b)), v.l > 0, -60 - (53 - b)) END)",
    # v: bs_limbs of a group's limb sums, b: bs_bits(v.h), each a column of its own query level (a macro
    # repeats its arguments' expressions: nested, their planning would grow with every level)
    "CREATE OR REPLACE MACRO bs_fsum(v, b, finite, plain) AS"
    " (CASE WHEN finite IS NOT FALSE THEN bs_fsum_of(v, b) ELSE plain END)",
)


def _limb_sums(expr: str) -> str:
    """SQL aggregates of a group for ``bs_fsum`` (see FSUM_STEPS): the limb sums ``_h``, ``_m``, ``_l``, whether every value is finite (``_finite``) and the plain sum (``_plain``: NaN or inf
    anywhere make fsum's result that of a plain sum)."""
    finite = f"CASE WHEN isfinite({expr}) THEN {{f}}({expr}) ELSE 0 END"
    return (f"sum({finite.format(f='bs_limb0')}) AS _h, sum({finite.format(f='bs_limb1')}) AS _m, "
            f"sum({finite.format(f='bs_limb2')}) AS _l, bool_and(isfinite({expr})) AS _finite, sum({expr}) AS _plain")


# The query levels after the limb sums (``{prev}``: the level holding them), ending in column ``_fsum``.
FSUM_STEPS = ("{name}_v AS (SELECT *, bs_limbs(_h, _m, _l) AS _v FROM {prev}),\n"
              "{name}_b AS (SELECT *, bs_bits(_v.h) AS _b FROM {name}_v),\n"
              "{name} AS (SELECT *, bs_fsum(_v, _b, _finite, _plain) AS _fsum FROM {name}_b)")


@dataclass(frozen=True)
class ViewOptions:
    """What ``toolkit.summary.SummaryOptions`` chooses, as the views need it: the judge (None: each run's
    primary judge), the passes (None: all) and the order (auto: reference for imported runs)."""

    judge: str | None = None
    passes: tuple[int, ...] | None = None
    order: str = "auto"


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def duck_type(table: str, column: str) -> str:
    return _DUCK_TYPES[str(TABLES[table].schema.field(column).type)]


def columns(table: str) -> list[str]:
    return [c for c in TABLES[table].names if c not in HIDDEN.get(table, ())]


def base_view(table: str, files: list[str]) -> str:
    """CREATE VIEW of a stored table over exactly these (absolute) Parquet files, with the schema's
    columns and types; no files: an empty view of the same columns."""
    cols = ", ".join(f'CAST("{c}" AS {duck_type(table, c)}) AS "{c}"' for c in columns(table))
    if files:
        source = f"read_parquet([{', '.join(_literal(f) for f in files)}], union_by_name = true)"
        return f'CREATE OR REPLACE VIEW "{table}" AS SELECT {cols} FROM {source}'
    nulls = ", ".join(f'CAST(NULL AS {duck_type(table, c)}) AS "{c}"' for c in columns(table))
    return f'CREATE OR REPLACE VIEW "{table}" AS SELECT {nulls} WHERE false'


INTERVALS = (
    "CREATE TABLE IF NOT EXISTS run_intervals (run_id VARCHAR, benchmark VARCHAR, ci_low DOUBLE, ci_high DOUBLE,"
    " run_updated_at VARCHAR, store_version BIGINT)"
)


def derived_view(view: View, options: ViewOptions = ViewOptions()) -> str:
    judge = "r.judge_model" if options.judge is None else _literal(options.judge)
    selection = f"x.judge_model = {judge}"
    if options.passes is not None:
        selection += f" AND x.judge_pass IN ({', '.join(str(int(p)) for p in options.passes) or 'NULL'})"
    if options.order not in ("auto", "reference", "dataset"):
        raise ValueError(f"order: {options.order!r} is not auto, reference or dataset")
    order = ("CASE WHEN r.source = 'imported' THEN 'reference' ELSE 'dataset' END" if options.order == "auto"
             else _literal(options.order))
    sql = view.sql.format(selection=selection, order=order, points=_literal(protocol.POINTS_RUBRIC),
                          positive=protocol.POSITIVE_CLASS_MIN, omission=protocol.SEVERE_OMISSION_CLASS,
                          commission=protocol.SEVERE_COMMISSION_CLASS, sums_value=_limb_sums("value"),
                          sums_mean=_limb_sums("mean"), fsum_b=FSUM_STEPS.format(name="fb", prev="s"),
                          fsum_r=FSUM_STEPS.format(name="fr", prev="s"))
    return f'CREATE OR REPLACE VIEW "{view.name}" AS {sql}'


def statements(files: dict[str, list[str]], options: ViewOptions = ViewOptions()) -> list[str]:
    """Everything a connection or a database file needs, in order: macros, base views, the intervals
    table (created empty if missing), derived views."""
    return [*MACROS, *(base_view(t, files.get(t, [])) for t in TABLES), INTERVALS,
            *(derived_view(v, options) for v in DERIVED)]


def dictionary() -> str:
    """The derived views' data dictionary (Markdown), for ``schemas/tables.md``."""
    out = ["## Derived views", "",
           "`bedside sql`, `bs.connect(store)` and the database file of `bedside db` define these views over the",
           "tables above, from one definition each (`toolkit/sql/_derived_views.py`), in plain DuckDB SQL: the numbers",
           "equal the toolkit's scoring and summaries exactly. Their settings: each run's primary judge, all its",
           "passes, and the `auto` order (the reference order, with the scores the source file reported, for",
           "imported runs; dataset order, recomputed, for collected ones); `bs.connect` takes other settings.", ""]
    for v in DERIVED:
        out += [f"### `{v.name}`", "", v.doc, "", f"One row per {v.grain}.", "",
                "| column | type | meaning |", "|---|---|---|"]
        out += [f"| `{n}` | {t} | {d} |" for n, t, d in v.columns]
        out.append("")
    out += ["### `run_intervals`", "",
            "A table, not a view: bootstrap 95% intervals cannot be computed in SQL, so `bedside db` (and",
            "`bs.connect` when a query names `benchmark_scores` or `run_summary`) computes them with",
            "`toolkit.summary` and stores them here, one row per run x benchmark (`benchmark` null: the overall",
            "macro mean), with the run's `updated_at` and the store version they were computed at. The views",
            "show an interval only while the run's `updated_at` is unchanged; a run written since shows null",
            "intervals until `bedside db --out FILE` runs again.", "",
            "### `bedside_info`", "",
            "Database files only (`bedside db`): one row naming what the file mirrors. `format` (`bedside-db 1`),",
            "`store_path` (absolute), `store_version` (the store version its views read; rewritten by every",
            "refresh), `written_at`, `refreshed_at`, `intervals_store_version` (the version `run_intervals` was",
            "computed at) and `bedside_version`. The file names the store's Parquet files by absolute path: after",
            "moving the store, or when a refresh was missed (the file was held open for writing) and a vacuum has",
            "since removed files it names, run `bedside db --out FILE` again.", ""]
    return "\n".join(out)
