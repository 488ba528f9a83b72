"""Speculative round candidates: cohorts, target-row allocation and confidence forecasts."""

from __future__ import annotations

import bisect
import copy
import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ignition.components.descriptor import Descriptor
from ignition.helios.config import SpeculationMode
from ignition.helios.decide.utility import Decision, LanePick, LaneView, decode_lane, lane_order_key
from ignition.helios.state.acceptance import expected_output


def lane_ceiling(view: LaneView, d: Descriptor) -> int:
    """min(D + 1, W, request limit) (``Descriptor.verify_rows``): output limit, remaining
    context and the request's own draft limit (grammar) bound the rows."""
    limit = min(view.remaining_output, view.remaining_context, view.max_rows)
    return max(1, min(d.verify_rows, limit))


@dataclass
class _Lane:
    view: LaneView
    ceiling: int
    base: float
    gains: list[float]
    ranks: list[float]
    full: float = 0.0  # base + sum(gains), summed once: every ordering key reads it

    def __post_init__(self) -> None:
        self.full = self.base + sum(self.gains)


def _lanes(
    views: Sequence[LaneView], d: Descriptor, decision: Decision, duration_ms: float
) -> list[_Lane]:
    out = []
    device = d.is_device_allocated
    for view in views:
        ceiling = lane_ceiling(view, d)
        if ceiling > view.remaining_output:
            continue
        base = (
            view.prices.output_token
            + view.prices.delivery
            + decision.age_value(view.sigma_ms, view.age_ms, duration_ms)
        )
        survivals = list(view.survivals[: ceiling - 1])
        survivals += [0.0] * (ceiling - 1 - len(survivals))
        gains = [view.prices.output_token * s**decision.alpha for s in survivals]
        if device:
            forecast = list(view.forecast[: ceiling - 1])
            forecast += [0.0] * (ceiling - 1 - len(forecast))
            ranks = forecast
        else:
            ranks = gains
        out.append(_Lane(view, ceiling, base, gains, ranks))
    return out


def best_fixed_cohort(
    values: Sequence[float], ceilings: Sequence[int], max_lanes: int, budget: int
) -> list[int]:
    """The highest-value set of complete prefixes fitting ``max_lanes`` lanes and ``budget``
    rows: an exact knapsack over B and P (at most 64 lanes), never a greedy fill."""
    groups: dict[int, list[int]] = {}
    for i, c in enumerate(ceilings):
        groups.setdefault(c, []).append(i)
    # state (lanes, rows) -> (value, counts per group so far)
    states: dict[tuple[int, int], tuple[float, tuple[int, ...]]] = {(0, 0): (0.0, ())}
    for c, members in groups.items():
        usable = members[: min(len(members), max_lanes, budget // c)]
        prefix = [0.0]
        for i in usable:
            prefix.append(prefix[-1] + values[i])
        grown: dict[tuple[int, int], tuple[float, tuple[int, ...]]] = {}
        for (lanes, rows), (value, counts) in states.items():
            for k in range(len(usable) + 1):
                if lanes + k > max_lanes or rows + k * c > budget:
                    break
                key = (lanes + k, rows + k * c)
                total = value + prefix[k]
                if key not in grown or total > grown[key][0]:
                    grown[key] = (total, (*counts, k))
        states = grown
    # best value; equal values prefer more lanes, then fewer rows
    _, best = max(states.items(), key=lambda item: (item[1][0], item[0][0], -item[0][1]))
    chosen = [
        i for (c, members), k in zip(groups.items(), best[1], strict=True) for i in members[:k]
    ]
    return sorted(chosen)


def _prefix_value(order: list[_Lane], budget: int, max_lanes: int) -> tuple[float, int]:
    """Best (value, m) over cohort prefixes of ``order`` under the row budget."""
    pool: list[tuple[float, int, int, float]] = []  # (-rank, depth, slot, gain), sorted
    best_value, best_m = float("-inf"), 0
    base_sum = 0.0
    for m, lane in enumerate(order[: min(max_lanes, budget)], start=1):
        base_sum += lane.base
        for depth, (rank, gain) in enumerate(zip(lane.ranks, lane.gains, strict=True), 1):
            bisect.insort(pool, (-rank, depth, lane.view.slot, gain))
        extra = budget - m
        value = base_sum + sum(item[3] for item in pool[:extra])
        if value > best_value:
            best_value, best_m = value, m
    return best_value, best_m


def _allocate(cohort: list[_Lane], budget: int) -> list[int]:
    """Rows per lane: one pending row each, extra rows to the best causal frontier."""
    rows = [1] * len(cohort)
    marginals = sorted(
        (-rank, depth, lane.view.slot, i)
        for i, lane in enumerate(cohort)
        for depth, rank in enumerate(lane.ranks, 1)
    )
    extra = budget - len(cohort)
    for _, _, _, i in marginals[: max(0, extra)]:
        rows[i] += 1
    return rows


def _orderings(
    lanes: list[_Lane], length: int, by_full: list[_Lane] | None = None
) -> list[list[_Lane]]:
    """The three bounded orderings, each cut to the prefixes the search can use;
    ``by_full``, where given, is ``lanes`` sorted by the first key already."""
    keys = (
        lambda lane: lane_order_key(lane.view, lane.full),
        lambda lane: lane_order_key(lane.view, lane.base),
        lambda lane: lane_order_key(lane.view, lane.full / (1 + len(lane.gains))),
    )
    seen: set[tuple[int, ...]] = set()
    out = []
    for k, key in enumerate(keys):
        if k == 0 and by_full is not None:
            order = by_full[:length]  # = nsmallest(length, lanes, key): the keys are unique
        else:
            order = heapq.nsmallest(length, lanes, key=key)
        ident = tuple(lane.view.slot for lane in order)
        if ident not in seen:
            seen.add(ident)
            out.append(order)
    return out


def speculative_cohort(
    views: Sequence[LaneView],
    d: Descriptor,
    decision: Decision,
    duration_ms: float,
    mode: SpeculationMode,
    *,
    max_lanes: int | None = None,
    budget: int | None = None,
) -> list[LanePick]:
    """Decode rows of one graph; ``max_lanes``/``budget`` shrink when a prompt row shares it."""
    lanes = _lanes(views, d, decision, duration_ms)
    if budget is None:
        budget = d.packed_capacity
    if max_lanes is None:
        max_lanes = d.batch_capacity
    if not lanes or max_lanes <= 0 or budget <= 0:
        return []
    by_full = sorted(lanes, key=lambda lane: lane_order_key(lane.view, lane.full))
    top = by_full[:max_lanes]
    if sum(lane.ceiling for lane in top) <= budget:
        cohort, rows = top, [lane.ceiling for lane in top]
    elif mode is SpeculationMode.FIXED and not d.is_device_allocated:
        chosen = best_fixed_cohort(
            [lane.full for lane in by_full], [lane.ceiling for lane in by_full], max_lanes, budget
        )
        cohort = [by_full[i] for i in chosen]
        rows = [lane.ceiling for lane in cohort]
    else:
        best: tuple[float, list[_Lane]] | None = None
        for order in _orderings(lanes, min(max_lanes, budget), by_full):
            value, m = _prefix_value(order, budget, max_lanes)
            if best is None or value > best[0]:
                best = (value, order[:m])
        assert best is not None
        cohort = best[1]
        rows = _allocate(cohort, budget)
    picks = []
    for lane, q in zip(cohort, rows, strict=True):
        query = lane.ceiling if d.is_device_allocated else q
        output = expected_output(lane.view.survivals, q, decision.alpha)
        reserved = max(query, d.proposal_depth + 1)
        pick = decode_lane(lane.view, decision, duration_ms, query, output, reserved)
        pick.max_advance = min(query, budget)
        picks.append(pick)
    return picks


@dataclass(frozen=True)
class Cohort:
    """A graph's best decode cohort: its value and identity now, its lanes on demand."""

    total_value: float
    num_lanes: int
    key: tuple
    build: Callable[[], list[LanePick]]


class LaneTable:
    """Decoder values shared by every graph of one decision."""

    def __init__(
        self,
        views: Sequence[LaneView],
        decision: Decision,
        max_depth: int,
        survivals: Sequence[tuple[float, ...]] | None = None,
    ) -> None:
        """``survivals`` replaces the views' own (acceptance learning scores probes with
        optimistic estimates); views carrying them are made only when a cohort needs one."""
        self.views = list(views)
        self.decision = decision
        self._survivals = survivals
        self._twins: dict[int, LaneView] = {}
        self.fixed: list[float] = []  # delivery price + age value at T = 0
        self._outputs: list[list[float]] = []  # [q] -> expected output with q rows
        for i, v in enumerate(self.views):
            self.fixed.append(v.prices.delivery + decision.age_value(v.sigma_ms, v.age_ms, 0.0))
            outputs, total = [0.0, 1.0], 1.0
            own = v.survivals if survivals is None else survivals[i]
            for depth in range(max_depth):
                s = own[depth] if depth < len(own) else 0.0
                total += s**decision.alpha
                outputs.append(total)
            self._outputs.append(outputs)
        self._orders: dict[int, list[tuple[int, int, float]]] = {}
        self._prefixes: dict[tuple[int, int], tuple[list, int, float, float]] = {}

    def _view(self, i: int) -> LaneView:
        if self._survivals is None:
            return self.views[i]
        twin = self._twins.get(i)
        if twin is None:
            twin = self._twins[i] = copy.copy(self.views[i])
            twin.survivals = self._survivals[i]
        return twin

    def order(self, cap: int) -> list[tuple[int, int, float]]:
        """(view index, ceiling, value without the duration term), best first."""
        found = self._orders.get(cap)
        if found is None:
            keyed = []
            for i, v in enumerate(self.views):
                if v.remaining_output < 1:
                    continue
                ceiling = max(1, min(cap, v.remaining_output, v.remaining_context, v.max_rows))
                value = self.fixed[i] + v.prices.output_token * self._outputs[i][ceiling]
                keyed.append(((-value, v.last_served_seq, v.slot), (i, ceiling, value)))
            keyed.sort(key=lambda pair: pair[0])
            found = self._orders[cap] = [row for _, row in keyed]
        return found

    def cohort(
        self,
        d: Descriptor,
        mode: SpeculationMode,
        duration_ms: float,
        *,
        max_lanes: int | None = None,
        budget: int | None = None,
    ) -> Cohort | None:
        budget = d.packed_capacity if budget is None else budget
        max_lanes = d.batch_capacity if max_lanes is None else max_lanes
        if max_lanes <= 0 or budget <= 0:
            return None
        cap = d.verify_rows
        top, rows, value0, sigmas = self._prefix(cap, max_lanes)
        if not top:
            return None
        if rows > budget:
            if mode is SpeculationMode.ADAPTIVE or d.is_device_allocated:
                views = self._leaders(cap, min(max_lanes, budget), duration_ms)
            else:
                views = [self._view(i) for i in range(len(self.views))]
            picks = speculative_cohort(
                views, d, self.decision, duration_ms, mode, max_lanes=max_lanes, budget=budget
            )
            key = tuple((p.view.handle, p.query_length) for p in picks)
            return Cohort(sum(p.value for p in picks), len(picks), key, lambda: picks)
        value = value0 + self.decision.age_value(sigmas, 0.0, duration_ms)

        def build() -> list[LanePick]:
            return [self._pick(i, ceiling, d, duration_ms, budget) for i, ceiling, _ in top]

        return Cohort(value, len(top), ("prefix", cap, len(top)), build)

    def _prefix(self, cap: int, max_lanes: int) -> tuple[list, int, float, float]:
        """The first ``max_lanes`` of ``order(cap)``: lanes, rows, value, summed sigmas."""
        prefix = self._prefixes.get((cap, max_lanes))
        if prefix is None:
            top = self._head(cap, max_lanes)
            rows, value0, sigmas = 0, 0.0, 0.0
            for i, ceiling, value in top:
                rows += ceiling
                value0 += value
                sigmas += self.views[i].sigma_ms or 0.0
            prefix = self._prefixes[(cap, max_lanes)] = (top, rows, value0, sigmas)
        return prefix

    def _head(self, cap: int, max_lanes: int) -> list[tuple[int, int, float]]:
        """The first ``max_lanes`` entries of ``order(cap)``."""
        return self.order(cap)[:max_lanes]

    def _leaders(self, cap: int, length: int, duration_ms: float) -> list[LaneView]:
        """Views that can appear in the first ``length`` places of any bounded ordering."""
        full = self.order(cap)

        def age(i: int) -> float:
            return self.decision.age_value(self.views[i].sigma_ms, 0.0, duration_ms)

        per_row = heapq.nsmallest(
            length,
            full,
            key=lambda r: (
                -(r[2] + age(r[0])) / r[1],
                self.views[r[0]].last_served_seq,
                self.views[r[0]].slot,
            ),
        )
        chosen = {i for i, _, _ in full[:length]}
        chosen |= {i for i, _, _ in self.order(1)[:length]}
        chosen |= {i for i, _, _ in per_row}
        return [self._view(i) for i in sorted(chosen)]

    def _pick(self, i: int, ceiling: int, d: Descriptor, duration_ms: float, budget: int):
        view = self.views[i]
        output = self._outputs[i][ceiling]
        pick = decode_lane(
            view, self.decision, duration_ms, ceiling, output, max(ceiling, d.proposal_depth + 1)
        )
        pick.max_advance = min(ceiling, budget)
        return pick
