"""Bound-and-skip: evaluate only the shapes that could be selected."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios.config import SpeculationMode
from ignition.helios.decide.policy import candidates_for, prune_dominated
from ignition.helios.decide.refresh import could_win
from ignition.helios.decide.utility import RELATIVE_TIE, Candidate, Decision
from ignition.helios.fast.catalog_index import CatalogIndex
from ignition.helios.fast.tables import Tables
from ignition.helios.state.cost import CostModel, Freshness

BOUND_MARGIN = 1e-6


def _score_bounds(
    shapes: Sequence[tuple[Descriptor, bool]],
    tables: Tables,
    costs: CostModel,
    decision: Decision,
    now_ns: int,
    stale: bool = False,
) -> list[float | None]:
    """For each shape, a true upper bound on the score of any candidate of it; None where it must be
    evaluated."""
    memo = tables.bounds if tables.decision is decision else None
    lanes, prompts = tables.decoders, tables.prompts
    skipped = (Freshness.UNKNOWN,) if stale else (Freshness.UNKNOWN, Freshness.STALE)
    out: list[float | None] = []
    for d, _ in shapes:
        if d.kind is GraphKind.PREFILL:
            out.append(None)
            continue
        entry = costs.entry(d)
        if entry.freshness(now_ns, costs.ttl_ns) in skipped:
            out.append(None)
            continue
        duration_ns = entry.estimate_ns
        if memo is not None:
            found = memo.get((id(d), duration_ns))
            if found is not None and found[0] is d:
                out.append(found[1])
                continue
        t_ms = duration_ns / 1e6
        value = lanes.value_bound(d.verify_rows, d.batch_capacity, t_ms)
        if d.kind is GraphKind.MIXED and d.prompt_lanes > 1:
            value += prompts.lane_value_bound(d)  # issue 39: the L best rows
        elif d.kind is GraphKind.MIXED:
            prompt = prompts.rows(d, False, 1, d.prefill_capacity)
            if prompt:
                value += max(0.0, prompt[0].value)
        bound = value / t_ms - decision.waiting_cost(t_ms)
        if memo is not None:
            memo[(id(d), duration_ns)] = (d, bound)
        out.append(bound)
    return out


def largest_bound(
    shapes: Sequence[tuple[Descriptor, bool]],
    tables: Tables,
    costs: CostModel,
    decision: Decision,
    now_ns: int,
) -> float:
    """The largest score bound among ``shapes`` that have one (-inf for none)."""
    tables.decoders.arrays.positive_sums(
        [d.verify_rows for d, _ in shapes if d.kind is not GraphKind.PREFILL]
    )
    found = _score_bounds(shapes, tables, costs, decision, now_ns)
    return max((b for b in found if b is not None), default=-math.inf)


def bounded_candidates(
    shapes: Sequence[tuple[Descriptor, bool]],
    tables: Tables,
    costs: CostModel,
    decision: Decision,
    now_ns: int,
    mode: SpeculationMode,
    index: CatalogIndex,
    others: Sequence[Candidate] = (),
    bound_stale: bool = False,
) -> list[Candidate]:
    """``all_candidates`` less shapes that provably cannot be selected among them and
    ``others``: the same winner, the same stale alternatives, far fewer cohorts."""
    found: dict[int, list[Candidate]] = {}
    # every ceiling's decoder sums in one vectorised pass (lane_core.py)
    tables.decoders.arrays.positive_sums(
        [d.verify_rows for d, _ in shapes if d.kind is not GraphKind.PREFILL]
    )
    floor = max((c.score for c in others if not c.is_indeterminate), default=-math.inf)
    bounded: list[tuple[float, int]] = []
    bounds = _score_bounds(shapes, tables, costs, decision, now_ns, bound_stale)
    for position, bound in enumerate(bounds):
        if bound is None:
            found[position] = _evaluate(shapes[position], tables, costs, decision, now_ns, mode)
        else:
            bounded.append((-bound, position))
    bounded.sort()
    best = max([floor, *(c.score for out in found.values() for c in out if not c.is_indeterminate)])
    while True:
        skipped: list[tuple[float, int]] = []
        for k, (negative, position) in enumerate(bounded):
            bound = -negative
            if bound < best - BOUND_MARGIN * max(1.0, abs(best), abs(bound)):
                skipped = bounded[k:]
                break
            out = found[position] = _evaluate(
                shapes[position], tables, costs, decision, now_ns, mode
            )
            best = max([best, *(c.score for c in out if not c.is_indeterminate)])
        where = {id(shapes[p][0]): p for _, p in skipped}
        wanted = {
            where[id(o)]
            for out in list(found.values())
            for c in out
            for o in index.dominators.get(id(c.descriptor), ())
            if id(o) in where
        }
        for position in wanted:
            found[position] = _evaluate(shapes[position], tables, costs, decision, now_ns, mode)
        kept = prune_dominated([c for position in sorted(found) for c in found[position]])
        best = max([floor, *(c.score for c in kept if not c.is_indeterminate)])
        bounded = [(b, p) for b, p in skipped if p not in found]
        if not bounded or -bounded[0][0] < best - BOUND_MARGIN * max(
            1.0, abs(best), abs(bounded[0][0])
        ):
            return kept


def stale_alternative(
    shapes: Sequence[tuple[Descriptor, bool]],
    tables: Tables,
    costs: CostModel,
    decision: Decision,
    now_ns: int,
    mode: SpeculationMode,
    index: CatalogIndex,
    winner: Candidate,
) -> tuple[bool, Candidate | None]:
    """The inference candidate ``refresh.choose_refresh`` picks from ``all_candidates``:
    stale, of another cost entry than the ordinary ``winner``'s, not pruned, one that
    ``refresh.could_win``; the oldest ``refresh_key`` first, then the best ranked."""
    own_key = winner.descriptor.cost_key()
    bounds = _score_bounds(shapes, tables, costs, decision, now_ns, stale=True)
    groups: dict[int, list[tuple[float, int]]] = {}
    for position, (d, _) in enumerate(shapes):
        entry = costs.entry(d)
        if entry.freshness(now_ns, costs.ttl_ns) is not Freshness.STALE or d.cost_key() == own_key:
            continue
        key = max(entry.last_observation_ns, entry.last_attempt_ns)  # refresh.refresh_key
        bound = bounds[position]
        groups.setdefault(key, []).append((-math.inf if bound is None else -bound, position))
    where = {id(d): p for p, (d, _) in enumerate(shapes)}

    def survives(c: Candidate) -> bool:
        for o in index.dominators.get(id(c.descriptor), ()):
            p = where.get(id(o))
            if p is not None and any(
                x.work_key == c.work_key
                for x in _evaluate(shapes[p], tables, costs, decision, now_ns, mode)
            ):
                return False
        return True

    for key in sorted(groups):
        found: list[Candidate] = []
        best: Candidate | None = None
        for negative, position in sorted(groups[key]):
            bound = -negative
            if best is not None and bound < best.score - BOUND_MARGIN * max(
                1.0, abs(best.score), abs(bound)
            ):
                break
            for c in _evaluate(shapes[position], tables, costs, decision, now_ns, mode):
                if survives(c) and could_win(c, winner, costs, decision):
                    found.append(c)
                    if best is None or c.score > best.score:
                        best = c
        if best is not None:
            tied = any(
                c is not best
                and abs(c.score - best.score)
                <= RELATIVE_TIE * max(1.0, abs(c.score), abs(best.score))
                for c in found
            )
            return (False, None) if tied else (True, best)
    return True, None


def _evaluate(
    shape: tuple[Descriptor, bool],
    tables: Tables,
    costs: CostModel,
    decision: Decision,
    now_ns: int,
    mode: SpeculationMode,
) -> list[Candidate]:
    """``candidates_for``, memoised on the tables: a program's candidates depend on the
    decision only through the tables and on time only through its cost's freshness."""
    d, decode_only = shape
    if tables.decision is not decision:
        return candidates_for(d, tables, costs, decision, now_ns, mode, decode_only)
    # the estimates version: a stranded tail is priced with the other graphs' costs
    key = (id(d), decode_only, costs.estimates_version, costs.freshness(d, now_ns), mode)
    found = tables.evaluated.get(key)
    if found is None or found[0] is not d:
        found = (d, candidates_for(d, tables, costs, decision, now_ns, mode, decode_only))
        tables.evaluated[key] = found
    return found[1]


# the memoised candidates_for, for the selector's mixed-width rule (decide/mixed_width.py)
evaluate_shape = _evaluate
