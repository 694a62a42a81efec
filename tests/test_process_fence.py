"""Process-level measures live in one fenced module, toolkit/_process.py: read from the source (nothing is
imported), no other module loads ctypes, calls mallopt, runs the private ``atexit._run_exitfuncs``, ends
the process with ``os._exit`` or assigns into ``sys.modules``."""

from __future__ import annotations

import ast
from pathlib import Path

TOOLKIT = Path(__file__).resolve().parents[1] / "toolkit"
FENCE = TOOLKIT / "_process.py"


def _tricks(source: str) -> list[str]:
    """What the source does that only the fenced module may: one line per occurrence."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "ctypes" for a in node.names):
            found.append(f"line {node.lineno}: import ctypes")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "ctypes":
            found.append(f"line {node.lineno}: from ctypes")
        elif isinstance(node, (ast.Attribute, ast.Name)):
            name = node.attr if isinstance(node, ast.Attribute) else node.id
            if name in ("mallopt", "_run_exitfuncs"):
                found.append(f"line {node.lineno}: {name}")
            elif isinstance(node, ast.Attribute) and ast.unparse(node) == "os._exit":
                found.append(f"line {node.lineno}: os._exit")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                if isinstance(target, ast.Subscript) and ast.unparse(target.value) == "sys.modules":
                    how = "deleted" if isinstance(node, ast.Delete) else "assigned"
                    found.append(f"line {node.lineno}: sys.modules[...] {how}")
    return sorted(set(found), key=lambda hit: (int(hit.split(":")[0].split()[1]), hit))


def test_the_finder_sees_each_trick() -> None:
    source = ("import ctypes\nimport atexit, os, sys\nctypes.CDLL('libc.so.6').mallopt(-1, 0)\n"
              "atexit._run_exitfuncs()\nos._exit(0)\nsys.modules['x'] = None\ndel sys.modules['x']\n")
    assert _tricks(source) == ["line 1: import ctypes", "line 3: mallopt", "line 4: _run_exitfuncs",
                               "line 5: os._exit", "line 6: sys.modules[...] assigned",
                               "line 7: sys.modules[...] deleted"]
    assert _tricks("import sys\nfound = sys.modules.get('x')\nos.exit = None\n") == []


def test_no_process_trick_outside_the_fenced_module() -> None:
    found = {str(p.relative_to(TOOLKIT)): hits for p in sorted(TOOLKIT.rglob("*.py"))
             if p != FENCE and (hits := _tricks(p.read_text(encoding="utf-8")))}
    assert found == {}
