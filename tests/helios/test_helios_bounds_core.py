"""Issue 14: bound-and-skip's score bounds, computed for every shape in one vectorised
pass, are the floats the per-shape Python bound gives (``LaneTable.value_bound``, the
best prompt row, the waiting cost), on random scheduler states: the same skips follow."""

from __future__ import annotations

import random

from test_helios_fast_selector import _Walk

from ignition.components.catalog import GraphKind
from ignition.helios.bounds import _score_bounds
from ignition.helios.cost import Freshness
from ignition.helios.policy import active_descriptors
from ignition.helios.projection import build_population
from ignition.helios.tables import build_tables


def _python_bound(d, tables, costs, decision, now_ns):
    """The per-shape bound as bounds.py computed it before its vectorised pass."""
    if d.kind is GraphKind.PREFILL:
        return None
    entry = costs.entry(d)
    if entry.freshness(now_ns, costs.ttl_ns) is not Freshness.FRESH:
        return None
    t_ms = entry.estimate_ns / 1e6
    cap = min(d.proposal_depth + 1 if d.speculation_enabled else 1, d.token_capacity)
    value = tables.decoders.value_bound(cap, d.batch_capacity, t_ms)
    if d.kind is GraphKind.MIXED:
        prompt = tables.prompts.rows(d, False, 1, d.prefill_capacity)
        if prompt:
            value += max(0.0, prompt[0].value)
    return value / t_ms - decision.waiting_cost(t_ms)


def test_vectorised_shape_bounds_equal_the_per_shape_python_bounds():
    rng = random.Random(19)
    checked, kinds = 0, set()
    while checked < 300:
        walk = _Walk(rng)
        for _ in range(rng.randint(10, 30)):
            walk.perturb()
            s = walk.s
            start_ns = s.queue.expected_end_ns(s.now_ns)
            population, decision = build_population(
                s.requests, s.queue, s.descriptors, s.costs, s.policy, start_ns, s._max_depth
            )
            tables = build_tables(s.index, population, decision, s._max_depth)
            shapes = active_descriptors(s.index, population)
            fast = _score_bounds(shapes, tables, s.costs, decision, s.now_ns)
            for (d, _), bound in zip(shapes, fast, strict=True):
                assert bound == _python_bound(d, tables, s.costs, decision, s.now_ns), d
                if bound is not None:
                    kinds.add(d.kind)
            checked += 1
            walk.act(s.plan())
    assert {GraphKind.SPECULATIVE, GraphKind.MIXED} <= kinds
