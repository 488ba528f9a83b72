"""Candidates and selection."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios.config import SpeculationMode
from ignition.helios.decide.chunk_target import (
    REJECTED,
    smallest_prompt_capacity,
    speculation_within_target,
    within_target,
)
from ignition.helios.decide.generation_twin import twinned_mixed
from ignition.helios.decide.left_out import (
    carry_times,
    generation_left_out_score,
    left_out_score,
)
from ignition.helios.decide.prompt_lanes import Scored, fill_rows, pack_lanes
from ignition.helios.decide.prompt_runs import open_run
from ignition.helios.decide.rounds import LaneTable
from ignition.helios.decide.tails import completion_times, stranded_tail_score
from ignition.helios.decide.terminal import TerminalView
from ignition.helios.decide.utility import (
    Candidate,
    Decision,
    LanePick,
    LaneView,
    compare,
    consumable_tokens,
    finish,
    lane_order_key,
    prompt_capacity,
    tokens_to_endpoint,
)
from ignition.helios.state.cost import CostModel, Freshness

SCHEDULABLE_KINDS = (GraphKind.PREFILL, GraphKind.DECODE, GraphKind.SPECULATIVE, GraphKind.MIXED)
QUEUEABLE_KINDS = (GraphKind.DECODE, GraphKind.SPECULATIVE)


@dataclass(frozen=True)
class Population:
    """The requests one decision may serve: prompt rows and decoders."""

    prompts: tuple[LaneView, ...]
    decoders: tuple[LaneView, ...]
    pending: tuple[LaneView, ...] = ()  # awaiting a prerequisite (restore, capture)
    terminal: tuple[TerminalView, ...] = ()  # awaiting terminal retirement


def explores_needlessly(
    view: LaneView, d: Descriptor, descriptors: Sequence[Descriptor], capacity: int
) -> bool:
    """An unmeasured larger prompt graph is excluded when a smaller prepared capacity of
    the same family consumes the same tokens up to the next message or prompt endpoint."""
    wanted = min(consumable_tokens(view, capacity), tokens_to_endpoint(view))
    for other in descriptors:
        if other.kind is not d.kind or other is d or other.prompt_lanes != d.prompt_lanes:
            continue
        if d.kind is GraphKind.MIXED and (
            other.batch_capacity != d.batch_capacity
            or other.token_capacity != d.token_capacity
            or other.speculation_enabled != d.speculation_enabled
        ):
            continue
        smaller = lane_capacity(other)
        if smaller < capacity and consumable_tokens(view, smaller) >= wanted:
            return True
    return False


class PromptTable:
    """Prompt rows of one decision: each capacity earns only the tokens it can consume."""

    def __init__(self, views: Sequence[LaneView], descriptors: Sequence[Descriptor]) -> None:
        self.views = list(views)
        self.descriptors = descriptors
        self._best: dict[tuple[int, int, int], list[LanePick]] = {}

    def rows(
        self, d: Descriptor, unknown: bool, max_rows: int, token_budget: int
    ) -> list[LanePick]:
        """The highest-value prompt rows fitting ``max_rows`` and ``token_budget``."""
        capacity = prompt_capacity(d)
        key = (capacity, max_rows, token_budget)
        if not unknown and key in self._best:
            return self._best[key]
        scored = self.scored(d, unknown, min(capacity, token_budget))
        if max_rows == 1:
            scored = [min(scored, key=lambda x: x[0])] if scored else []
        else:
            scored.sort(key=lambda x: x[0])
        chosen = fill_rows(scored, max_rows, token_budget)
        if not unknown:
            self._best[key] = chosen
        return chosen

    def scored(self, d: Descriptor, unknown: bool, usable: int) -> list[Scored]:
        """Every row with tokens at ``usable``, keyed by its value there (unsorted)."""
        scored = []
        for view in self.views:
            tokens = consumable_tokens(view, usable)
            if tokens <= 0:
                continue
            if unknown and explores_needlessly(view, d, self.descriptors, lane_capacity(d)):
                continue
            value = view.prices.prefill_token * tokens
            if tokens >= view.remaining_prompt:
                value += view.prices.output_token + view.prices.delivery
            scored.append((lane_order_key(view, value), tokens, view))
        return scored

    def lanes(self, d: Descriptor, unknown: bool) -> list[LanePick]:
        """The prompt lanes of a prefill or mixed program (``prompt_lanes.py``); with one
        lane the seed's single prompt row."""
        budget = prompt_budget(d)
        if d.prompt_lanes == 1:
            return self.rows(d, unknown, 1, budget)
        scored = self.scored(d, unknown, min(lane_capacity(d), budget))
        scored.sort(key=lambda x: x[0])  # keys are unique: they end in the slot
        return pack_lanes(scored, d.prompt_lanes)


def prompt_budget(d: Descriptor) -> int:
    """The prompt tokens the lanes of a prefill or mixed program share."""
    return d.prefill_capacity if d.kind is GraphKind.MIXED else d.packed_capacity


def lane_capacity(d: Descriptor) -> int:
    """The prompt tokens one lane of ``d`` may take: the bucket with one lane (a batched
    prefill's per-row capacity), P / L with L lanes (``Descriptor.lane_capacity``)."""
    return prompt_capacity(d) if d.prompt_lanes == 1 else d.lane_capacity


@dataclass
class Tables:
    prompts: PromptTable
    decoders: LaneTable


def shape_family(d: Descriptor) -> tuple:
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
    family = shape_family(d)

    def make(
        value: float, count: int, key: tuple, build, prompts: Sequence[LanePick] = ()
    ) -> Candidate:
        c = Candidate(d, duration_ns, freshness, value, count, (*family, *key), build)
        finish(c, decision)
        # issue 40: the ready decoders a generation frame leaves out (helios/left_out.py)
        if not prompts and d.kind is not GraphKind.PREFILL and decision.generation_left_out:
            carry = carry_times(tables.prompts.descriptors, costs)
            order = tables.decoders.order(1)
            c.score = generation_left_out_score(c, count, order, carry, decision)
        # issue 39: a speculative frame carrying no prompt stays within the TBT target
        generation = not prompts and d.kind is not GraphKind.PREFILL
        if generation and not speculation_within_target(c, decision):
            c.score = REJECTED
        # issue 10: a chunk stranding a tail (helios/tails.py); completing rows never do
        if len(prompts) == 1 and prompts[0].expected_output == 0 and not c.is_indeterminate:
            times = completion_times(tables.prompts.descriptors, costs)
            c.score = stranded_tail_score(c, prompts[0], times, decision)
        # issue 29: the decoders a prompt frame leaves out (helios/left_out.py)
        if prompts and not c.is_indeterminate:
            carry = carry_times(tables.prompts.descriptors, costs)
            order = tables.decoders.order(1)
            chunk = sum(p.num_prompt_tokens for p in prompts)
            served = count - len(prompts)
            c.score = left_out_score(c, chunk, served, order, carry, decision, len(prompts))
        # issue 40: a prompt frame keeps the ready decoders' gap within their TBT target
        if decision.tbt_target_ms > 0 and prompt_capacity(d) > 0 and not c.is_indeterminate:
            carry = carry_times(tables.prompts.descriptors, costs)
            smallest = smallest_prompt_capacity(tables.prompts.descriptors, costs)
            carries_prompt = bool(prompts) or d.kind is GraphKind.PREFILL
            served = count - len(prompts) if prompts and d.kind is GraphKind.MIXED else 0
            if carries_prompt and not within_target(
                c, prompt_capacity(d), tables.decoders, served, carry, smallest, decision
            ):
                c.score = REJECTED
        # issue 40: a started prompt's chunks follow one another (helios/prompt_runs.py)
        runs = decision.prompt_runs and not c.is_indeterminate
        if runs and (prompts or d.kind is not GraphKind.PREFILL):  # batched prefills aside
            run = open_run(tables.prompts, tables.decoders, costs, decision)
            if run is not None and not run.takes_run_chunk(prompts):
                c.score = REJECTED
        return c

    def prompt_key(pick: LanePick) -> tuple:
        return ("prompt", pick.view.handle, pick.num_prompt_tokens)

    if d.kind is GraphKind.PREFILL:
        if d.prompt_lanes > 1:  # issue 39: lanes sharing one bucket (prompt_lanes.py)
            rows = tables.prompts.lanes(d, unknown)
        else:
            rows = tables.prompts.rows(d, unknown, d.batch_capacity, d.packed_capacity)
        if not rows:
            return []
        key = tuple(prompt_key(p) for p in rows)
        # the tail and left-out lookaheads: a single row, or the lanes of one bucket
        single = rows if len(rows) == 1 or d.prompt_lanes > 1 else ()
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
    prompts = tables.prompts.lanes(d, unknown)  # one, or up to L (issue 39)
    if prompts:
        free = d.batch_capacity - len(prompts)  # rows left beside the prompt lanes
        budget = min(d.packed_capacity, free * d.token_capacity)
        rows = tables.decoders.cohort(d, mode, t_ms, max_lanes=free, budget=budget)
        value = sum(p.value for p in prompts) + (rows.total_value if rows else 0.0)
        count = len(prompts) + (rows.num_lanes if rows else 0)
        ordered = sorted(prompts, key=lambda p: p.view.slot)  # one key per work
        key = (*(k for p in ordered for k in prompt_key(p)), *(rows.key if rows else ()))

        def build() -> tuple[list[LanePick], int]:
            lanes = sorted([*prompts, *(rows.build() if rows else [])], key=lambda p: p.view.slot)
            first = min(lanes.index(p) for p in prompts)  # the plan's first prompt row
            return lanes, first

        out.append(make(value, count, key, build, prompts))
    return out


def capacities(d: Descriptor) -> tuple[int, int, int, int, int]:
    return (
        d.batch_capacity,
        d.token_capacity,
        d.packed_capacity,
        d.prefill_capacity,
        d.prompt_lanes,  # issue 39: more lanes than the same work needs are padding
    )


def dominates(small: tuple[int, ...], large: tuple[int, ...]) -> bool:
    return all(s <= g for s, g in zip(small, large, strict=True)) and small != large


def prune_dominated(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Drop physical shapes padded beyond an alternative with the same logical work."""
    groups: dict[tuple, list[Candidate]] = {}
    for c in candidates:
        groups.setdefault(c.work_key, []).append(c)
    kept = []
    for group in groups.values():
        for c in group:
            caps = capacities(c.descriptor)
            if not any(dominates(capacities(o.descriptor), caps) for o in group if o is not c):
                kept.append(c)
    return kept


class CatalogIndex:
    """Lines of one catalog along which larger shapes only add padding."""

    def __init__(self, descriptors: Sequence[Descriptor]) -> None:
        self.descriptors = [d for d in descriptors if d.kind in SCHEDULABLE_KINDS]
        self._batch_lines: dict[tuple, list[Descriptor]] = {}
        self._prompt_lines: dict[tuple, list[Descriptor]] = {}
        for d in self.descriptors:
            family = shape_family(d)
            if (
                d.kind is not GraphKind.PREFILL
                and d.packed_capacity == d.batch_capacity * d.token_capacity
            ):
                key = (*family, d.token_capacity, d.prefill_capacity, d.prompt_lanes)
                self._batch_lines.setdefault(key, []).append(d)
            if d.kind in (GraphKind.PREFILL, GraphKind.MIXED):
                lanes = d.prompt_lanes
                key = (*family, d.batch_capacity, d.token_capacity if d.is_mixed else 0, lanes)
                self._prompt_lines.setdefault(key, []).append(d)
        for line in self._batch_lines.values():
            line.sort(key=lambda d: d.batch_capacity)
        for line in self._prompt_lines.values():
            line.sort(key=prompt_capacity)
        self.smallest_prompt = {id(line[0]) for line in self._prompt_lines.values()}
        self.twinned = twinned_mixed(self.descriptors)  # generation_twin.py
        self.max_lanes = max((d.prompt_lanes for d in self.descriptors), default=1)
        self._active: dict[tuple[int, int, int], list[Descriptor]] = {}

    def active(
        self, num_decoders: int, longest_prompt: int, num_prompts: int = 1
    ) -> list[Descriptor]:
        key = (num_decoders, longest_prompt, min(num_prompts, self.max_lanes))
        found = self._active.get(key)
        if found is None:
            if len(self._active) > 4096:
                self._active.clear()
            found = self._active[key] = self._compute_active(*key)
        return found

    def _compute_active(
        self, num_decoders: int, longest_prompt: int, num_prompts: int
    ) -> list[Descriptor]:
        skipped: set[int] = set()
        for line in self._batch_lines.values():
            prompt_rows = min(line[0].prompt_lanes, num_prompts) if longest_prompt else 0
            rows = num_decoders + (prompt_rows if line[0].is_mixed else 0)
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
                reached = reached or lane_capacity(d) >= longest_prompt
        return [d for d in self.descriptors if id(d) not in skipped]


def build_tables(
    index: CatalogIndex, population: Population, decision: Decision, max_depth: int
) -> Tables:
    return Tables(
        PromptTable(population.prompts, index.descriptors),
        LaneTable(population.decoders, decision, max_depth),
    )


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


def active_descriptors(
    index: CatalogIndex, population: Population, generation_twin: bool = False
) -> list[tuple[Descriptor, bool]]:
    """The shapes worth evaluating for this population, each with whether its decode-only
    cohort competes (only the smallest prompt capacity of a mixed line offers it; with
    ``generation_twin``, PolicyConfig's, not one whose generation twin does:
    ``generation_twin.py``)."""
    num_decoders = sum(1 for v in population.decoders if v.remaining_output >= 1)
    longest = max((v.remaining_prompt for v in population.prompts), default=0)
    twinned = index.twinned if generation_twin else frozenset()
    return [
        (d, not d.is_mixed or (id(d) in index.smallest_prompt and id(d) not in twinned))
        for d in index.active(num_decoders, longest, len(population.prompts))
    ]


def select(candidates: Sequence[Candidate]) -> Candidate | None:
    best: Candidate | None = None
    for c in candidates:
        if best is None or compare(c, best) < 0:
            best = c
    return best
