"""The package's import graph, read from the source with ``ast``: every import counts,
module level, inside functions and under ``TYPE_CHECKING`` alike, since a function-level
import hides a dependency from the module graph without removing it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import ignition

PACKAGE = Path(ignition.__file__).parent

# Import cycles that remain, each as the modules of one strongly connected component. This
# list may only shrink: a new cycle, or one that grew, fails the test, and so does an entry
# that is no longer exactly a cycle (shrink or remove it then). Empty since issue 25 split
# Helios's selection into decide/ (the definition) and fast/ (the bounded search on it).
KNOWN_CYCLES: frozenset[frozenset[str]] = frozenset()


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(path): path for path in PACKAGE.rglob("*.py")}


def imported(name: str, path: Path) -> Iterator[str]:
    """The ignition modules ``name`` imports anywhere in its source: ``from a import b``
    names module ``a.b`` when that is a module, else ``a``."""
    known = modules()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
            targets = [t for t in targets[:-1] if t in known] or [base]
        else:
            continue
        for target in targets:
            if target.split(".")[0] == "ignition" and target in known and target != name:
                yield target


@cache
def graph() -> dict[str, frozenset[str]]:
    return {name: frozenset(imported(name, path)) for name, path in modules().items()}


def strongly_connected() -> list[frozenset[str]]:
    """Tarjan's components of more than one module (the import cycles)."""
    edges, index, low, stack, on_stack, found = graph(), {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in edges[node]:
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def imports_from(room: str, forbidden: tuple[str, ...]) -> list[str]:
    """``module -> target`` for every import from ``room`` into a forbidden room."""
    return sorted(
        f"{source} -> {target}"
        for source, targets in graph().items()
        if source == room or source.startswith(room + ".")
        for target in targets
        if any(target == f or target.startswith(f + ".") for f in forbidden)
    )


def test_the_graph_sees_function_level_imports():
    """A reader that skipped function bodies would find no edge from serving to this one."""
    assert "ignition.distributed.loading" in graph()["ignition.serving.engine"]


def test_distributed_never_imports_serving():
    """``serving`` injects the sharded loader, rank zero's worker and the followers' role."""
    assert imports_from("ignition.distributed", ("ignition.serving",)) == []


def test_runtime_never_imports_the_glue_above_it():
    above = ("ignition.serving", "ignition.server", "ignition.cli")
    assert imports_from("ignition.runtime", above) == []


def test_every_module_lives_in_a_room():
    """The package root holds ``__init__`` alone: each module is found in the room of its
    job, so the rooms' import directions below cover every module."""
    assert sorted(n for n in modules() if n.count(".") == 1 and room_of(n) is None) == []


def test_no_import_cycle_but_the_known_ones():
    unknown = [sorted(c) for c in strongly_connected() if not any(c <= k for k in KNOWN_CYCLES)]
    assert unknown == []


def test_every_known_cycle_is_still_exactly_a_cycle():
    """Breaking (part of) a known cycle shrinks KNOWN_CYCLES, so it cannot come back."""
    stale = [sorted(k) for k in KNOWN_CYCLES if k not in strongly_connected()]
    assert stale == []


# The house plan's rooms and what each may import (docs/architecture.md, "Rooms"): the
# rooms listed, and through them what those may import (layers below stay reachable).
MAY_IMPORT: dict[str, frozenset[str]] = {
    "recipes": frozenset(),
    "components": frozenset({"recipes"}),
    "kernels": frozenset(),
    "model": frozenset({"kernels"}),
    "compiler": frozenset({"components", "model"}),
    "helios": frozenset({"components"}),
    "simulate": frozenset({"helios", "components", "recipes", "runtime"}),
    "runtime": frozenset({"helios", "compiler", "model"}),
    "distributed": frozenset({"runtime", "compiler", "model", "helios", "components"}),
    "direct": frozenset({"helios"}),
    "server": frozenset({"runtime", "direct"}),
    # bundle -> engine -> app: injects the distributed loader and roles into the runtime
    "serving": frozenset({"server", "distributed", "direct"}),
    # each replica opens its app through serving; the router reuses server's errors
    "replicas": frozenset({"serving"}),
    # one module per command over all of the above
    "cli": frozenset({"replicas", "simulate"}),
}


def reachable(room: str) -> frozenset[str]:
    """The rooms ``room`` may import: its own list and, through it, theirs."""
    seen: set[str] = set()
    todo = list(MAY_IMPORT[room])
    while todo:
        other = todo.pop()
        if other not in seen:
            seen.add(other)
            todo.extend(MAY_IMPORT.get(other, ()))
    return frozenset(seen)


def room_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in MAY_IMPORT else None


def test_reachable_follows_the_rooms_below():
    assert reachable("server") >= {"runtime", "helios", "model", "kernels", "recipes"}
    assert "runtime" not in reachable("helios") and "compiler" not in reachable("model")


def test_every_room_imports_only_the_rooms_the_house_plan_allows():
    """No room reaches up: Helios never imports the runtime or the model, the model never
    the compiler, the runtime never the server, and so on."""
    upward = sorted(
        f"{source} -> {target}"
        for source, targets in graph().items()
        if (room := room_of(source)) is not None
        for target in targets
        if (other := room_of(target)) not in (None, room) and other not in reachable(room)
    )
    assert upward == []
