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


# The runtime's rooms and the runtime rooms each may import directly (not through another).
# A runtime room may import anything outside the runtime that runtime's row allows.
RUNTIME_MAY_IMPORT: dict[str, frozenset[str]] = {
    "chat": frozenset(),
    "vision": frozenset(),
    "ple": frozenset(),
    "retention": frozenset(),
    # a request names its speculative method (checked against the proposals registry) and
    # carries its images and its grammar (type annotations only)
    "requests": frozenset({"vision", "grammar", "proposals"}),
    # proposal sources read the request; the loop's hook tells Helios their offers
    # (loop/proposal_hooks.py), so proposals/ never names the loop or the executors
    "proposals": frozenset({"requests"}),
    # the structured-outputs matcher: its forced tokens are a constrained row's proposal
    "grammar": frozenset({"requests", "proposals"}),
    "executors": frozenset({"requests", "vision", "ple", "grammar", "proposals"}),
    "loop": frozenset({"executors", "requests", "retention", "vision", "grammar", "proposals"}),
    "tracing": frozenset({"loop", "executors", "requests"}),
}
# Runtime's top level: the glue that builds the rooms (assembly, bundle) and bridges the
# engine to asyncio; no room imports it.
RUNTIME_GLUE = frozenset({"assembly", "async_engine", "bundle"})
# Rooms of one module, at the top level: structured outputs (grammar.py).
ONE_MODULE_ROOMS = frozenset({"grammar"})


def runtime_room(module: str) -> str | None:
    """The runtime room (or glue module) ``module`` belongs to; None outside the runtime."""
    parts = module.split(".")
    if parts[:2] != ["ignition", "runtime"] or len(parts) < 3:
        return None
    return parts[2]


def misplaced_in_runtime(names: list[str]) -> list[str]:
    """Modules at runtime's top level that are neither glue nor a one-module room, and
    rooms (packages) that declare no import directions."""
    second = {n for n in names if n.count(".") == 2}
    rooms = {n for n in second if any(m.startswith(n + ".") for m in names)}
    loose = [n for n in second - rooms if n.split(".")[2] not in RUNTIME_GLUE | ONE_MODULE_ROOMS]
    undeclared = [f"{r}/" for r in rooms if r.split(".")[2] not in RUNTIME_MAY_IMPORT]
    return sorted(loose + undeclared)


def runtime_modules() -> list[str]:
    return sorted(n for n in modules() if n.startswith("ignition.runtime."))


def runtime_upward(edges: dict[str, frozenset[str]]) -> list[str]:
    """``source -> target`` for every import from a runtime room into a runtime room (or
    the glue) its row does not list."""
    return sorted(
        f"{source} -> {target}"
        for source, targets in edges.items()
        if (room := runtime_room(source)) in RUNTIME_MAY_IMPORT
        for target in targets
        if (other := runtime_room(target)) not in (None, room)
        and other not in RUNTIME_MAY_IMPORT[room]
    )


def test_runtime_top_level_holds_the_glue_alone():
    """A module is placed in its room: one back at runtime's top level fails here."""
    assert misplaced_in_runtime(runtime_modules()) == []


def test_a_module_put_back_at_runtime_top_level_or_an_undeclared_room_is_found():
    back, room = "ignition.runtime.chat_offsets", "ignition.runtime.misc"
    names = [*runtime_modules(), back, room, f"{room}.helpers"]
    assert misplaced_in_runtime(names) == [back, f"{room}/"]


def test_every_runtime_room_imports_only_the_runtime_rooms_it_lists():
    """requests/ and chat/ never import the loop, executors/ never the loop, no room the
    glue above it, and so on."""
    assert runtime_upward(graph()) == []


def test_the_runtime_directions_the_house_plan_names():
    loop = ("ignition.runtime.loop",)
    assert imports_from("ignition.runtime.requests", loop) == []
    assert imports_from("ignition.runtime.chat", loop) == []
    assert imports_from("ignition.runtime.executors", loop) == []
    # proposal sources are read by the loop's hook, never reach into the loop themselves
    assert imports_from("ignition.runtime.proposals", (*loop, "ignition.runtime.executors")) == []
    glue = tuple(f"ignition.runtime.{g}" for g in sorted(RUNTIME_GLUE))
    assert imports_from("ignition.runtime.loop", glue) == []


def is_docstring_alone(source: str) -> bool:
    """True when a module's body is one docstring: a package ``__init__`` that re-exports
    nothing, so each name is imported from its home module."""
    body = ast.parse(source).body
    if len(body) != 1 or not isinstance(body[0], ast.Expr):
        return False
    value = body[0].value
    return isinstance(value, ast.Constant) and isinstance(value.value, str)


def test_every_runtime_package_init_is_its_docstring_alone():
    """``from ignition.runtime.ple.delivery import PleRuntime``, never through ``ple``."""
    inits = sorted((PACKAGE / "runtime").rglob("__init__.py"))
    exporting = [
        str(p.relative_to(PACKAGE)) for p in inits if not is_docstring_alone(p.read_text())
    ]
    assert exporting == []


def test_a_package_init_that_re_exports_is_found():
    assert not is_docstring_alone('"""Rows."""\nfrom ignition.runtime.ple.cache import RowCache\n')
    assert is_docstring_alone('"""Rows: where they live and how\nthey reach the program."""\n')


def test_an_executor_importing_the_engine_is_found():
    """The re-export this layout removed: LiveRequest through loop/engine.py."""
    planted = {"ignition.runtime.executors.base": frozenset({"ignition.runtime.loop.engine"})}
    assert runtime_upward(planted) == [
        "ignition.runtime.executors.base -> ignition.runtime.loop.engine"
    ]


def test_a_proposal_source_importing_the_loop_is_found():
    """The offers hook lives in loop/: put back under proposals/, it is an upward import."""
    planted = {"ignition.runtime.proposals.offers": frozenset({"ignition.runtime.loop.hooks"})}
    assert runtime_upward(planted) == [
        "ignition.runtime.proposals.offers -> ignition.runtime.loop.hooks"
    ]


# Helios's rooms: state/ holds what the scheduler has learned and keeps (cost model,
# acceptance trackers, rates, requests, the queue); decide/ holds the decisions over it;
# fast/ finds decide's winner quickly; the scheduler and its glue sit at the top level.
# Each room may import, inside Helios, its own modules and the ones listed here.
HELIOS_BASE = tuple(f"ignition.helios.{m}" for m in ("config", "types", "plans", "reports"))
HELIOS_MAY_IMPORT: dict[str, tuple[str, ...]] = {
    "state": HELIOS_BASE,
    "decide": (*HELIOS_BASE, "ignition.helios.state"),
}


def helios_upward(edges: dict[str, frozenset[str]]) -> list[str]:
    """``source -> target`` for every import from a Helios room into a Helios module its
    row does not list (the scheduler, fast/, the glue, or for state/ any decision)."""
    found = []
    for room, allowed in HELIOS_MAY_IMPORT.items():
        own = f"ignition.helios.{room}"
        for source, targets in edges.items():
            if source != own and not source.startswith(own + "."):
                continue
            for target in targets:
                inside = target.startswith("ignition.helios.")
                ok = any(target == a or target.startswith(a + ".") for a in (own, *allowed))
                if inside and not ok:
                    found.append(f"{source} -> {target}")
    return sorted(found)


def test_helios_decide_and_state_import_nothing_above_them():
    """decide/ never imports the scheduler, fast/ or the glue; state/ imports no decision."""
    assert helios_upward(graph()) == []


def test_a_decision_importing_the_scheduler_or_state_importing_a_decision_is_found():
    planted = {
        "ignition.helios.decide.policy": frozenset({"ignition.helios.scheduler"}),
        "ignition.helios.state.cost": frozenset({"ignition.helios.decide.utility"}),
        "ignition.helios.state.queue": frozenset({"ignition.helios.fast.tables"}),
    }
    assert helios_upward(planted) == [
        "ignition.helios.decide.policy -> ignition.helios.scheduler",
        "ignition.helios.state.cost -> ignition.helios.decide.utility",
        "ignition.helios.state.queue -> ignition.helios.fast.tables",
    ]
