"""One decision's prompt and decoder tables, and the cache that hands them out again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ignition.components.descriptor import Descriptor
from ignition.helios.decide.policy import (
    CatalogIndex,
    Population,
    explores_needlessly,
    lane_capacity,
    prompt_budget,
)
from ignition.helios.decide.prompt_lanes import Scored, fill_rows, lane_value_bound, pack_lanes
from ignition.helios.decide.utility import (
    Candidate,
    Decision,
    LanePick,
    LaneView,
    consumable_tokens,
    lane_order_key,
    prompt_capacity,
    prompt_lane,
)
from ignition.helios.fast.lane_table import LaneTable


class PromptTable:
    """Prompt rows of one decision: each capacity earns only the tokens it can consume."""

    def __init__(self, views: Sequence[LaneView], descriptors: Sequence[Descriptor]) -> None:
        self.views = list(views)
        self.descriptors = descriptors
        self._best: dict[tuple[int, int, int], list[LanePick]] = {}
        self._lanes: dict[tuple[int, int, int], list[LanePick]] = {}  # L > 1 (issue 39)
        # Measured capacities: the scored rows depend only on min(capacity, budget)
        self._scored: dict[int, list[tuple[tuple, int, LaneView]]] = {}
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
        scored = self._sorted_scores(d, unknown, usable)
        chosen = fill_rows(scored, max_rows, token_budget)
        if not unknown:
            self._best[key] = chosen
        return chosen

    def _sorted_scores(self, d: Descriptor, unknown: bool, usable: int) -> list[Scored]:
        """Every row with tokens at ``usable``, best key first (kept per usable capacity
        when the program's cost is known)."""
        scored = None if unknown else self._scored.get(usable)
        if scored is None:
            capacity = lane_capacity(d)
            scored = []
            for view in self.views:
                tokens = consumable_tokens(view, usable)
                if tokens <= 0:
                    continue
                if unknown and explores_needlessly(view, d, self.descriptors, capacity):
                    continue
                value = view.prices.prefill_token * tokens
                if tokens >= view.remaining_prompt:
                    value += view.prices.output_token + view.prices.delivery
                scored.append((lane_order_key(view, value), tokens, view))
            # keys are unique (they end in the slot), so the sorted head is the minimum
            scored.sort(key=lambda x: x[0])
            if not unknown:
                self._scored[usable] = scored
        return scored

    def lanes(self, d: Descriptor, unknown: bool) -> list[LanePick]:
        """``decide.policy.PromptTable.lanes``: the prompt lanes of a prefill or mixed
        program (``decide/prompt_lanes.py``), kept per bucket, lane count and budget."""
        budget = prompt_budget(d)
        if d.prompt_lanes == 1:
            return self.rows(d, unknown, 1, budget)
        key = (lane_capacity(d), d.prompt_lanes, budget)
        found = None if unknown else self._lanes.get(key)
        if found is None:
            scored = self._sorted_scores(d, unknown, min(lane_capacity(d), budget))
            found = pack_lanes(scored, d.prompt_lanes)
            if not unknown:
                self._lanes[key] = found
        return found

    def lane_value_bound(self, d: Descriptor) -> float:
        """The prompt lanes' value in ``d`` (its cost known; ``prompt_lanes.lane_value_bound``:
        exact, the lanes being the L best rows at the lane capacity)."""
        scored = self._sorted_scores(d, False, min(lane_capacity(d), prompt_budget(d)))
        return lane_value_bound(scored, d.prompt_lanes)

    def _top_row(self, usable: int) -> list[LanePick]:
        """The first row of the sorted scores at ``usable`` tokens, without scoring every row."""
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
                value += view.prices.output_token + view.prices.delivery
            entry = (lane_order_key(view, value), tokens, view)
            if best is None or entry[0] < best[0]:
                best = entry
        return [] if best is None else [prompt_lane(best[2], best[1])]


@dataclass
class Tables:
    """One decision's prompt and decoder tables."""

    prompts: PromptTable
    decoders: LaneTable
    decision: Decision | None = None
    evaluated: dict[tuple, tuple[Descriptor, list[Candidate]]] = field(default_factory=dict)
    bounds: dict[tuple, tuple[Descriptor, float | None]] = field(default_factory=dict)


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
    decision is equal: their orders, cohorts, prompt rows and bounds then still hold."""

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
