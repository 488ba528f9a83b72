"""The engine loop's modules import one way: no cycle among them, counting imports inside
functions and under TYPE_CHECKING (a cycle held open by either is still a cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

import ignition.runtime

RUNTIME = Path(ignition.runtime.__file__).parent
LOOP = {"engine", "frames", "preemption", "publication", "request_table", "lifecycle", "admission"}
LOOP |= {"loop_hooks", "retention_engine", "window_engine"}


def _imports(path: Path) -> set[str]:
    """Every ignition.runtime module ``path`` imports, at any depth of its syntax tree."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            is_runtime = parts[:2] == ["ignition", "runtime"] and len(parts) > 2
            if is_runtime and (RUNTIME / f"{parts[2]}.py").exists():
                found.add(parts[2])
    return found


def _graph() -> dict[str, set[str]]:
    return {p.stem: _imports(p) - {p.stem} for p in RUNTIME.glob("*.py")}


def _cycle_through(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """A path start -> ... -> start, if one exists."""
    stack, seen = [(start, [start])], set()
    while stack:
        node, path = stack.pop()
        for nxt in graph.get(node, ()):
            if nxt == start:
                return [*path, start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None


def test_the_walk_sees_imports_inside_functions_and_type_checking(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from ignition.runtime.engine import Engine\n"
        "def f():\n"
        "    import ignition.runtime.executors.frames\n"
    )
    assert _imports(path) == {"engine", "frames"}


def test_no_import_cycle_runs_through_the_engine_loop_modules():
    graph = _graph()
    for module in sorted(LOOP):
        assert _cycle_through(graph, module) is None, _cycle_through(graph, module)
