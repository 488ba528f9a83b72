"""A frozen copy of Helios's selection path before issue 14's fast path.

``policy``, ``projection``, ``rounds`` and ``learning`` here are verbatim copies of the
modules as they stood when issue 14 began (imports redirected to each other); the
differential test holds the scheduler's plan() to exactly the decisions this
reference makes. Do not optimise these files: they are the specification by example.
"""

from __future__ import annotations

from ignition.helios.decide.cost import Freshness
from ignition.helios.decide.refresh import choose_refresh
from ignition.helios.fast.state_search import state_candidates
from ignition.helios.scheduler import EXPLORATION, Scheduler
from ignition.helios.types import ExecutionClass, ScheduledPlan
from reference_selector.learning import choose_probe
from reference_selector.policy import (
    CatalogIndex,
    active_descriptors,
    all_candidates,
    build_tables,
    select,
)
from reference_selector.projection import build_population

_INDEXES: dict[int, tuple[object, CatalogIndex]] = {}


def _index(s: Scheduler) -> CatalogIndex:
    found = _INDEXES.get(id(s))
    if found is None or found[0] is not s.descriptors:
        found = _INDEXES[id(s)] = (s.descriptors, CatalogIndex(s.descriptors))
    return found[1]


def reference_plan(s: Scheduler) -> ScheduledPlan | None:
    """What ``Scheduler.plan()`` returned before issue 14, without changing ``s``."""
    if s.queue.why_closed() is not None:
        return None
    start_ns = s.queue.expected_end_ns(s.now_ns)
    population, decision = build_population(
        s.requests, s.queue, s.descriptors, s.costs, s.policy, start_ns, s._max_depth
    )
    index = _index(s)
    tables = build_tables(index, population, decision, s._max_depth)
    shapes = active_descriptors(index, population)
    candidates = all_candidates(shapes, tables, s.costs, decision, s.now_ns, s.speculation)
    states = (
        state_candidates(
            (*s.descriptors, *s.state_descriptors),
            population,
            s.costs,
            decision,
            s.policy,
            s.now_ns,
        )
        if s.state_descriptors
        else []
    )
    candidates += states
    # Issue 10: a winner the free pages cannot cover yields to a fitting state operation.
    winner = s.page_feasible(select(candidates), states)
    if winner is None:
        return None
    discovers = s.own_freshness(winner) is Freshness.UNKNOWN  # issue 10: a state op's own
    cls = ExecutionClass.DISCOVERY if discovers else ExecutionClass.ORDINARY
    credit = 0.0
    if cls is ExecutionClass.ORDINARY and s.refresh.can_open():
        stale = choose_refresh(winner, candidates, s.costs)
        if stale is not None:
            winner, cls, credit = stale, ExecutionClass.TIMING_REFRESH, s.refresh.balance_ns
    searched = (s._changes, s.costs.version)
    if cls is ExecutionClass.ORDINARY and s.learning.can_open() and s._no_probe_at != searched:
        probe = choose_probe(
            winner,
            shapes,
            population,
            tables,
            s.costs,
            decision,
            s.now_ns,
            s.speculation,
            s._max_depth,
            s._history_of,
        )
        if probe is not None:
            winner, cls = probe.candidate, ExecutionClass.ACCEPTANCE_LEARNING
            credit = s.learning.balance_ns
    needs = cls in EXPLORATION or s._needs_feedback(winner.descriptor, winner.freshness)
    if needs and not s.queue.is_empty:
        return None
    return s._freeze(winner, decision, start_ns, needs, credit, cls)
