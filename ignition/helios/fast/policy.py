"""Candidates and selection.

Every loaded physical capacity competes with the cohort that is best for it;
candidates with the same kind, cohort and logical work drop any physical shape
that is larger in every capacity than an alternative (timing estimates cannot
make redundant padding preferable). Prefill capacities earn only the tokens they
can consume; there is no smallest-fitting filter, duration ceiling or forced
oldest-request rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ignition.components.catalog import Descriptor, GraphKind
from ignition.helios.config import SpeculationMode
from ignition.helios.decide.cost import CostModel, Freshness
from ignition.helios.decide.left_out import carry_times, left_out_score
from ignition.helios.decide.tails import completion_times, stranded_tail_score
from ignition.helios.decide.terminal import TerminalView
from ignition.helios.decide.utility import (
    Candidate,
    Decision,
    LanePick,
    LaneView,
    compare,
    finish,
)
from ignition.helios.fast.tables import (
    PromptTable,
    TableCache,
    Tables,
    build_tables,
    prompt_capacity,
)

# Names other modules import from here (tables.py holds the tables since issue 14;
# bounded_candidates and BOUND_MARGIN, in bounds.py, resolve through __getattr__).
__all__ = [
    "QUEUEABLE_KINDS",
    "SCHEDULABLE_KINDS",
    "CatalogIndex",
    "Population",
    "PromptTable",
    "TableCache",
    "Tables",
    "active_descriptors",
    "all_candidates",
    "build_tables",
    "candidates_for",
    "prompt_capacity",
    "prune_dominated",
    "select",
]

SCHEDULABLE_KINDS = (GraphKind.PREFILL, GraphKind.DECODE, GraphKind.SPECULATIVE, GraphKind.MIXED)
QUEUEABLE_KINDS = (GraphKind.DECODE, GraphKind.SPECULATIVE)


@dataclass(frozen=True)
class Population:
    """The requests one decision may serve: prompt rows and decoders."""

    prompts: tuple[LaneView, ...]
    decoders: tuple[LaneView, ...]
    pending: tuple[LaneView, ...] = ()  # awaiting a prerequisite (restore, capture)
    terminal: tuple[TerminalView, ...] = ()  # awaiting terminal retirement


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
        # issue 10: a chunk stranding a tail (helios/tails.py); completing rows never do
        if prompt is not None and prompt.expected_output == 0 and not c.is_indeterminate:
            times = completion_times(tables.prompts.descriptors, costs)
            c.score = stranded_tail_score(c, prompt, times, decision)
        # issue 29: the decoders a prompt frame leaves out (helios/left_out.py)
        if prompt is not None and not c.is_indeterminate:
            carry = carry_times(tables.prompts.descriptors, costs)
            order = tables.decoders.order(1)
            c.score = left_out_score(c, prompt.num_prompt_tokens, count - 1, order, carry, decision)
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


def __getattr__(name: str) -> object:
    """``bounded_candidates`` and ``BOUND_MARGIN`` moved to bounds.py, which imports this
    module; they stay importable from here, resolved on first use."""
    if name in ("bounded_candidates", "BOUND_MARGIN"):
        from ignition.helios.fast import bounds

        return getattr(bounds, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
