"""Candidates and selection.

Every loaded physical capacity competes with the cohort that is best for it;
candidates with the same kind, cohort and logical work drop any physical shape
that is larger in every capacity than an alternative (timing estimates cannot
make redundant padding preferable). Prefill capacities earn only the tokens they
can consume; there is no smallest-fitting filter, duration ceiling or forced
oldest-request rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ignition.components.catalog import Descriptor, GraphKind
from ignition.helios.config import SpeculationMode
from ignition.helios.cost import CostModel, Freshness
from ignition.helios.rounds import LaneTable
from ignition.helios.tails import completion_times, stranded_tail_score
from ignition.helios.terminal import TerminalView
from ignition.helios.utility import (
    Candidate,
    Decision,
    LanePick,
    LaneView,
    compare,
    consumable_tokens,
    finish,
    lane_order_key,
    prompt_lane,
    tokens_to_endpoint,
)

SCHEDULABLE_KINDS = (GraphKind.PREFILL, GraphKind.DECODE, GraphKind.SPECULATIVE, GraphKind.MIXED)
QUEUEABLE_KINDS = (GraphKind.DECODE, GraphKind.SPECULATIVE)
# Skipping needs a bound below the best score by more than this (relative): far above
# the ranking's 1e-9 tie tolerance and any rounding between a bound and a real score.
BOUND_MARGIN = 1e-6


def prompt_capacity(d: Descriptor) -> int:
    if d.kind is GraphKind.MIXED:
        return d.prefill_capacity
    if d.kind is GraphKind.PREFILL:
        return d.token_capacity
    return 0


@dataclass(frozen=True)
class Population:
    """The requests one decision may serve: prompt rows and decoders."""

    prompts: tuple[LaneView, ...]
    decoders: tuple[LaneView, ...]
    pending: tuple[LaneView, ...] = ()  # awaiting a prerequisite (restore, capture)
    terminal: tuple[TerminalView, ...] = ()  # awaiting terminal retirement


def _explores_needlessly(
    view: LaneView, d: Descriptor, descriptors: Sequence[Descriptor], capacity: int
) -> bool:
    """An unmeasured larger prompt graph is excluded when a smaller prepared capacity of
    the same family consumes the same tokens up to the next message or prompt endpoint."""
    wanted = min(consumable_tokens(view, capacity), tokens_to_endpoint(view))
    for other in descriptors:
        if other.kind is not d.kind or other is d:
            continue
        if d.kind is GraphKind.MIXED and (
            other.batch_capacity != d.batch_capacity
            or other.token_capacity != d.token_capacity
            or other.speculation_enabled != d.speculation_enabled
        ):
            continue
        smaller = prompt_capacity(other)
        if smaller < capacity and consumable_tokens(view, smaller) >= wanted:
            return True
    return False


class PromptTable:
    """Prompt rows of one decision: each capacity earns only the tokens it can consume."""

    def __init__(self, views: Sequence[LaneView], descriptors: Sequence[Descriptor]) -> None:
        self.views = list(views)
        self.descriptors = descriptors
        self._best: dict[tuple[int, int, int], list[LanePick]] = {}
        # Measured capacities: the scored rows depend only on min(capacity, budget)
        self._scored: dict[int, list[tuple[tuple, int, LaneView]]] = {}
        # plain rows grouped by equal prefill price, best price first, each group in
        # (last served, slot) order
        self._by_price: list[list[LaneView]] | None = None
        self._by_remaining: list[LaneView] = []  # plain rows, shortest remaining prompt first
        self._irregular: list[LaneView] = []  # rows with image spans or capture ends

    def rows(
        self, d: Descriptor, unknown: bool, max_rows: int, token_budget: int
    ) -> list[LanePick]:
        """The highest-value prompt rows fitting ``max_rows`` and ``token_budget``."""
        capacity = prompt_capacity(d)
        key = (capacity, max_rows, token_budget)
        if not unknown and key in self._best:
            return self._best[key]
        usable = min(capacity, token_budget)
        if max_rows == 1 and not unknown:
            chosen = self._best[key] = self._top_row(usable)
            return chosen
        scored = None if unknown else self._scored.get(usable)
        if scored is None:
            scored = []
            for view in self.views:
                tokens = consumable_tokens(view, usable)
                if tokens <= 0:
                    continue
                if unknown and _explores_needlessly(view, d, self.descriptors, capacity):
                    continue
                value = view.prices.prefill_token * tokens
                if tokens >= view.remaining_prompt:
                    value += view.prices.output_token
                scored.append((lane_order_key(view, value), tokens, view))
            # keys are unique (they end in the slot), so the sorted head is the minimum
            scored.sort(key=lambda x: x[0])
            if not unknown:
                self._scored[usable] = scored
        chosen, used = [], 0
        for _, tokens, view in scored:
            if len(chosen) == max_rows:
                break
            if used + tokens <= token_budget:
                chosen.append(prompt_lane(view, tokens))
                used += tokens
        if not unknown:
            self._best[key] = chosen
        return chosen

    def _top_row(self, usable: int) -> list[LanePick]:
        """The first row of the sorted scores at ``usable`` tokens, without scoring every
        row: a plain row (no image span or capture end) longer than ``usable`` is worth
        prefill price x usable, which keeps the prefill-price order (multiplying by a
        positive number is monotone in floating point too), so only the head of each
        equal-price group, up to the first strictly lower value, and the rows that end
        within ``usable`` or are irregular can hold the minimum key."""
        if usable <= 0 or not self.views:
            return []
        if self._by_price is None:
            plain = [v for v in self.views if not v.image_spans and not v.capture_ends]
            self._irregular = [v for v in self.views if v.image_spans or v.capture_ends]
            self._by_price = []
            for v in sorted(
                plain, key=lambda v: (-v.prices.prefill_token, v.last_served_seq, v.slot)
            ):
                group = self._by_price[-1] if self._by_price else None
                if group and group[0].prices.prefill_token == v.prices.prefill_token:
                    group.append(v)
                else:
                    self._by_price.append([v])
            self._by_remaining = sorted(plain, key=lambda v: v.remaining_prompt)
        exact = list(self._irregular)
        for view in self._by_remaining:
            if view.remaining_prompt > usable:
                break
            exact.append(view)
        best: tuple | None = None
        top_value: float | None = None
        for group in self._by_price:
            # the group's best row not scored exactly below
            view = next((v for v in group if v.remaining_prompt > usable), None)
            if view is None:
                continue
            value = view.prices.prefill_token * usable
            if top_value is not None and value < top_value:
                break
            top_value = value
            entry = (lane_order_key(view, value), usable, view)
            if best is None or entry[0] < best[0]:
                best = entry
        for view in exact:
            tokens = consumable_tokens(view, usable)
            if tokens <= 0:
                continue
            value = view.prices.prefill_token * tokens
            if tokens >= view.remaining_prompt:
                value += view.prices.output_token
            entry = (lane_order_key(view, value), tokens, view)
            if best is None or entry[0] < best[0]:
                best = entry
        return [] if best is None else [prompt_lane(best[2], best[1])]


@dataclass
class Tables:
    """One decision's prompt and decoder tables. ``decision`` is set when the tables may
    memoise candidates and bounds for it (``build_tables``); those depend only on the
    tables, the decision, the program and its cost, so they outlive the plan() that made
    them while ``TableCache`` hands the same tables out."""

    prompts: PromptTable
    decoders: LaneTable
    decision: Decision | None = None
    evaluated: dict[tuple, tuple[Descriptor, list[Candidate]]] = field(default_factory=dict)
    bounds: dict[tuple, tuple[Descriptor, float | None]] = field(default_factory=dict)


def _family(d: Descriptor) -> tuple:
    depth = d.proposal_depth if d.kind in (GraphKind.SPECULATIVE, GraphKind.MIXED) else 0
    return (d.kind, d.speculation_enabled, d.value_source, depth)


def candidates_for(
    d: Descriptor,
    tables: Tables,
    costs: CostModel,
    decision: Decision,
    now_ns: int,
    mode: SpeculationMode,
    decode_only: bool = True,
) -> list[Candidate]:
    duration_ns = costs.estimate_ns(d)
    freshness = costs.freshness(d, now_ns)
    unknown = freshness is Freshness.UNKNOWN
    t_ms = duration_ns / 1e6
    family = _family(d)

    def make(value: float, count: int, key: tuple, build, prompt: LanePick | None = None):
        c = Candidate(d, duration_ns, freshness, value, count, (*family, *key), build)
        finish(c, decision)
        if prompt is not None:  # issue 10: a chunk stranding a tail (helios/tails.py)
            times = completion_times(tables.prompts.descriptors, costs)
            c.score = stranded_tail_score(c, prompt, times, decision)
        return c

    def prompt_key(pick: LanePick) -> tuple:
        return ("prompt", pick.view.handle, pick.num_prompt_tokens)

    if d.kind is GraphKind.PREFILL:
        rows = tables.prompts.rows(d, unknown, d.batch_capacity, d.packed_capacity)
        if not rows:
            return []
        key = tuple(prompt_key(p) for p in rows)
        single = rows[0] if len(rows) == 1 else None
        return [make(sum(p.value for p in rows), len(rows), key, lambda: (rows, -1), single)]
    if d.kind in QUEUEABLE_KINDS:
        cohort = tables.decoders.cohort(d, mode, t_ms)
        if cohort is None:
            return []
        return [
            make(cohort.total_value, cohort.num_lanes, cohort.key, lambda: (cohort.build(), -1))
        ]
    if d.kind is not GraphKind.MIXED:
        return []
    out = []
    cohort = tables.decoders.cohort(d, mode, t_ms) if decode_only else None
    if cohort is not None:
        out.append(
            make(cohort.total_value, cohort.num_lanes, cohort.key, lambda: (cohort.build(), -1))
        )
    prompt = tables.prompts.rows(d, unknown, 1, d.prefill_capacity)
    if prompt:
        budget = min(d.packed_capacity, (d.batch_capacity - 1) * d.token_capacity)
        rows = tables.decoders.cohort(d, mode, t_ms, max_lanes=d.batch_capacity - 1, budget=budget)
        value = prompt[0].value + (rows.total_value if rows else 0.0)
        count = 1 + (rows.num_lanes if rows else 0)
        key = (*prompt_key(prompt[0]), *(rows.key if rows else ()))

        def build() -> tuple[list[LanePick], int]:
            lanes = sorted([prompt[0], *(rows.build() if rows else [])], key=lambda p: p.view.slot)
            return lanes, lanes.index(prompt[0])

        out.append(make(value, count, key, build, prompt[0]))
    return out


def _capacities(d: Descriptor) -> tuple[int, int, int, int]:
    return (d.batch_capacity, d.token_capacity, d.packed_capacity, d.prefill_capacity)


def _dominates(small: tuple[int, ...], large: tuple[int, ...]) -> bool:
    return all(s <= g for s, g in zip(small, large, strict=True)) and small != large


def prune_dominated(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Drop physical shapes padded beyond an alternative with the same logical work."""
    groups: dict[tuple, list[Candidate]] = {}
    for c in candidates:
        groups.setdefault(c.work_key, []).append(c)
    kept = []
    for group in groups.values():
        for c in group:
            caps = _capacities(c.descriptor)
            if not any(_dominates(_capacities(o.descriptor), caps) for o in group if o is not c):
                kept.append(c)
    return kept


class CatalogIndex:
    """Lines of one catalog along which larger shapes only add padding.

    Along a batch line (same kind, depth, width and prompt capacity, rectangular P),
    every capacity at or above the number of eligible lanes serves the same cohort
    with the same work, so all but the smallest are dominated. Along a prompt line
    (same everything but the prompt capacity), every capacity at or above the longest
    remaining prompt consumes the same tokens. Skipping those shapes before evaluating
    them is exactly what pruning would do afterwards, only cheaper.
    """

    def __init__(self, descriptors: Sequence[Descriptor]) -> None:
        self.descriptors = [d for d in descriptors if d.kind in SCHEDULABLE_KINDS]
        self._batch_lines: dict[tuple, list[Descriptor]] = {}
        self._prompt_lines: dict[tuple, list[Descriptor]] = {}
        for d in self.descriptors:
            family = _family(d)
            if (
                d.kind is not GraphKind.PREFILL
                and d.packed_capacity == d.batch_capacity * d.token_capacity
            ):
                key = (*family, d.token_capacity, d.prefill_capacity)
                self._batch_lines.setdefault(key, []).append(d)
            if d.kind in (GraphKind.PREFILL, GraphKind.MIXED):
                key = (*family, d.batch_capacity, d.token_capacity if d.is_mixed else 0)
                self._prompt_lines.setdefault(key, []).append(d)
        for line in self._batch_lines.values():
            line.sort(key=lambda d: d.batch_capacity)
        for line in self._prompt_lines.values():
            line.sort(key=prompt_capacity)
        self.smallest_prompt = {id(line[0]) for line in self._prompt_lines.values()}
        # Shapes of the same family padded beyond another: the only pairs pruning can act
        # on (same logical work implies the same family). Static per catalog.
        self.dominators: dict[int, tuple[Descriptor, ...]] = {}
        for d in self.descriptors:
            found = tuple(
                o
                for o in self.descriptors
                if _family(o) == _family(d) and _dominates(_capacities(o), _capacities(d))
            )
            if found:
                self.dominators[id(d)] = found
        self._active: dict[tuple[int, int], list[Descriptor]] = {}

    def active(self, num_decoders: int, longest_prompt: int) -> list[Descriptor]:
        key = (num_decoders, longest_prompt)
        found = self._active.get(key)
        if found is None:
            if len(self._active) > 4096:
                self._active.clear()
            found = self._active[key] = self._compute_active(num_decoders, longest_prompt)
        return found

    def _compute_active(self, num_decoders: int, longest_prompt: int) -> list[Descriptor]:
        skipped: set[int] = set()
        for line in self._batch_lines.values():
            rows = num_decoders + (1 if line[0].is_mixed and longest_prompt else 0)
            reached = False
            for d in line:
                if reached:
                    skipped.add(id(d))
                reached = reached or d.batch_capacity >= rows
        for line in self._prompt_lines.values():
            reached = False
            for d in line:
                if reached:
                    skipped.add(id(d))
                reached = reached or prompt_capacity(d) >= longest_prompt
        return [d for d in self.descriptors if id(d) not in skipped]


def build_tables(
    index: CatalogIndex, population: Population, decision: Decision, max_depth: int
) -> Tables:
    return Tables(
        PromptTable(population.prompts, index.descriptors),
        LaneTable(population.decoders, decision, max_depth),
        decision,
    )


def _same_views(a: Sequence[object], b: Sequence[object]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


class TableCache:
    """The last decision's tables, handed out again while the population holds the same
    view objects (the projection reuses a view only when it is unchanged) and the
    decision is equal: their orders, cohorts, prompt rows and bounds then still hold.
    The prompt table alone is kept while only decoders changed (the clock moves decoder
    ages, never prompt rows')."""

    def __init__(self) -> None:
        self._last: tuple[CatalogIndex, int, Population, Tables] | None = None

    def tables(
        self, index: CatalogIndex, population: Population, decision: Decision, max_depth: int
    ) -> Tables:
        last = self._last
        if (
            last is None
            or last[0] is not index
            or last[1] != max_depth
            or not _same_views(last[2].prompts, population.prompts)
        ):
            tables = build_tables(index, population, decision, max_depth)
        elif last[3].decision == decision and _same_views(last[2].decoders, population.decoders):
            return last[3]
        else:
            decoders = LaneTable(population.decoders, decision, max_depth)
            tables = Tables(last[3].prompts, decoders, decision)
        self._last = (index, max_depth, population, tables)
        return tables


def all_candidates(
    shapes: Sequence[tuple[Descriptor, bool]],
    tables: Tables,
    costs: CostModel,
    decision: Decision,
    now_ns: int,
    mode: SpeculationMode,
) -> list[Candidate]:
    """Every shape of ``active_descriptors`` with its best cohorts, dominated ones pruned."""
    out: list[Candidate] = []
    for d, decode_only in shapes:
        out.extend(candidates_for(d, tables, costs, decision, now_ns, mode, decode_only))
    return prune_dominated(out)


def _score_bound(
    d: Descriptor, tables: Tables, costs: CostModel, decision: Decision, now_ns: int
) -> float | None:
    """A true upper bound on the score of any candidate of ``d``; None where ``d`` must
    be evaluated regardless (prefill rows are cheap; unknown costs rank first; stale
    ones are what timing refresh chooses among)."""
    if d.kind is GraphKind.PREFILL:
        return None
    entry = costs.entry(d)
    if entry.freshness(now_ns, costs.ttl_ns) is not Freshness.FRESH:
        return None
    duration_ns = entry.estimate_ns
    memo = tables.bounds if tables.decision is decision else None
    if memo is not None:
        key = (id(d), duration_ns)
        found = memo.get(key)
        if found is not None and found[0] is d:
            return found[1]
    bound = _fresh_bound(d, tables, duration_ns, decision)
    if memo is not None:
        memo[key] = (d, bound)
    return bound


def _fresh_bound(
    d: Descriptor, tables: Tables, duration_ns: int, decision: Decision
) -> float | None:
    t_ms = duration_ns / 1e6
    if t_ms <= 0:
        return None
    cap = min(d.proposal_depth + 1 if d.speculation_enabled else 1, d.token_capacity)
    value = tables.decoders.value_bound(cap, d.batch_capacity, t_ms)
    if d.kind is GraphKind.MIXED:
        prompt = tables.prompts.rows(d, False, 1, d.prefill_capacity)
        if prompt:
            value += max(0.0, prompt[0].value)
    return value / t_ms - decision.waiting_cost(t_ms)


def bounded_candidates(
    shapes: Sequence[tuple[Descriptor, bool]],
    tables: Tables,
    costs: CostModel,
    decision: Decision,
    now_ns: int,
    mode: SpeculationMode,
    index: CatalogIndex,
    others: Sequence[Candidate] = (),
) -> list[Candidate]:
    """``all_candidates`` less shapes that provably cannot be selected among them and
    ``others``: the same winner, the same stale alternatives, far fewer cohorts.

    Shapes are evaluated best bound first; once a bound falls clearly below the best
    real score (by more than the ranking's tie tolerance), every remaining shape is
    skipped; skipped shapes that could prune a kept candidate are evaluated after all.
    """
    found: dict[int, list[Candidate]] = {}
    floor = max((c.score for c in others if not c.is_indeterminate), default=-math.inf)
    bounded: list[tuple[float, int]] = []
    for position, (d, _) in enumerate(shapes):
        bound = _score_bound(d, tables, costs, decision, now_ns)
        if bound is None:
            found[position] = _evaluate(shapes[position], tables, costs, decision, now_ns, mode)
        else:
            bounded.append((-bound, position))
    bounded.sort()
    best = max([floor, *(c.score for out in found.values() for c in out if not c.is_indeterminate)])
    while True:
        # The best score so far may belong to a candidate that pruning removes, so the
        # skip is checked again against the survivors' best until it holds.
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
        # A skipped shape that pads beyond a kept candidate's could carry the same work
        # and prune it, as it would in the exhaustive path: evaluate those (they cannot
        # win, being below the best, but they must be there to prune).
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


def active_descriptors(
    index: CatalogIndex, population: Population
) -> list[tuple[Descriptor, bool]]:
    """The shapes worth evaluating for this population, each with whether its decode-only
    cohort competes (only the smallest prompt capacity of a mixed line offers it)."""
    num_decoders = sum(1 for v in population.decoders if v.remaining_output >= 1)
    longest = max((v.remaining_prompt for v in population.prompts), default=0)
    return [
        (d, not d.is_mixed or id(d) in index.smallest_prompt)
        for d in index.active(num_decoders, longest)
    ]


def select(candidates: Sequence[Candidate]) -> Candidate | None:
    best: Candidate | None = None
    for c in candidates:
        if best is None or compare(c, best) < 0:
            best = c
    return best
