"""The import graph of ``toolkit``, read from the source (no module is imported): no circles, no arrow
running back up the flow (protocol → dataset/tables → store → scoring/bootstrap → analysis → figures →
report; collect and reference write into the store; the CLI on top), packages entered by their public face
only, a small root and small files. Imports under ``if TYPE_CHECKING:`` are annotations only, never run,
and so not edges."""

from __future__ import annotations

import ast
from pathlib import Path

TOOLKIT = Path(__file__).resolve().parents[1] / "toolkit"


def _modules() -> dict[str, Path]:
    out = {}
    for path in TOOLKIT.rglob("*.py"):
        parts = path.relative_to(TOOLKIT.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _run_time_nodes(tree: ast.AST):
    """Every node but those under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in [child, *_run_time_nodes(child)])
            continue
        yield node
        yield from _run_time_nodes(node)


def _imports(module: str, path: Path) -> set[str]:
    """Full names of what the module imports (modules, or names in them), relative imports resolved."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in _run_time_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            names |= {f"{base}.{a.name}" for a in node.names}
    return names


def _graph() -> dict[str, set[str]]:
    """Module -> the toolkit modules it imports: ``from p import x`` is module ``p.x`` when there is one,
    else ``p`` (whose ``__init__`` runs either way, but its importing a submodule is no edge back)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        edges = set()
        for name in _imports(module, path):
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                edges.add(name)
        graph[module] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_the_cycle_finder_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_within_toolkit() -> None:
    assert _cycles(_graph()) == []


def test_the_store_imports_only_itself_and_the_table_definitions() -> None:
    graph = _graph()
    outside = {m: sorted(e for e in edges if not e.startswith("toolkit.store") and e != "toolkit.tables")
               for m, edges in graph.items() if m.startswith("toolkit.store")}
    assert {m: e for m, e in outside.items() if e} == {}
    for module, path in _modules().items():
        if module.startswith("toolkit.store"):
            third_party = {n.split(".")[0] for n in _imports(module, path)}
            assert "duckdb" not in third_party, module


# Each top-level module or package of toolkit and its place in the flow: an import may only point lower.
LAYERS: dict[str, int] = {
    "protocol": 0, "inputs": 0, "text": 0, "_process": 0,
    "tables": 1, "prices": 1, "dataset": 2,
    "store": 3, "scoring": 3, "bootstrap": 3, "sim": 3,
    "selection": 4, "failures": 4,
    "summary": 5, "labels": 5, "listing": 5,
    "score_tables": 6, "analysis": 6,
    "sql": 7,
    "figures": 8, "collect": 8, "reference": 8,
    "report": 9,
    "cli": 10, "console": 11, "__main__": 12, "toolkit": 13,
}


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "toolkit"


def test_every_top_level_module_has_a_place_in_the_flow() -> None:
    assert sorted({_top(m) for m in _modules()} - LAYERS.keys()) == []


def test_no_import_runs_back_up_the_flow() -> None:
    upward = sorted(f"{m} -> {e}" for m, edges in _graph().items() for e in edges
                    if _top(m) != _top(e) and LAYERS[_top(m)] <= LAYERS[_top(e)])
    assert upward == []


def test_packages_are_entered_by_their_public_face() -> None:
    """A private module (``_name``) is imported only from inside its own package."""
    private = sorted(f"{m} -> {e}" for m, edges in _graph().items() for e in edges
                     if any(p.startswith("_") and not p.startswith("__") for p in e.split(".")[1:])
                     and not m.startswith(e.rpartition(".")[0] + ".") and m != e.rpartition(".")[0])
    assert private == []


def test_the_root_holds_only_what_the_whole_house_shares() -> None:
    assert len([p for p in TOOLKIT.glob("*.py")]) <= 12


def test_no_source_file_exceeds_400_lines() -> None:
    long = {str(p.relative_to(TOOLKIT)): n for p in TOOLKIT.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert long == {}
