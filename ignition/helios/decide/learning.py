"""Funded acceptance learning: probes that offer a request a deeper speculative prefix."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ignition.components.descriptor import Descriptor
from ignition.helios.config import SpeculationMode
from ignition.helios.decide.policy import Population, Tables, candidates_for
from ignition.helios.decide.rounds import LaneTable
from ignition.helios.decide.utility import RELATIVE_TIE, Candidate, Decision
from ignition.helios.plans import LaneRole
from ignition.helios.state.acceptance import PrefixHistory
from ignition.helios.state.cost import CostModel, Freshness
from ignition.helios.types import RequestHandle

# The acceptance history a decision's request is scored and informed by.
HistoryOf = Callable[[RequestHandle], PrefixHistory]


@dataclass(frozen=True)
class Probe:
    candidate: Candidate
    gain: float  # optimistic score improvement per ms of physical execution
    least_weight: float  # aged weight of the least-informed added prefix


def ordinary_depths(winner: Candidate) -> dict[RequestHandle, int]:
    return {
        lane.view.handle: lane.query_length - 1
        for lane in winner.lanes
        if lane.role is LaneRole.DECODE
    }


def added_prefix_weights(
    c: Candidate,
    ordinary: Mapping[RequestHandle, int],
    history_of: HistoryOf,
) -> list[float]:
    """Aged weights at the first added depth of each lane offered beyond its ordinary
    choice that keeps output after the probe (a lane's view is the population's twin with
    optimistic survivals: the same remaining output)."""
    out = []
    for lane in c.lanes:
        if lane.role is not LaneRole.DECODE:
            continue
        handle = lane.view.handle
        depth = ordinary.get(handle, 0) + 1
        offered = lane.query_length - 1
        if offered >= depth and lane.view.remaining_output > lane.max_advance:
            out.append(history_of(handle).weight(depth))
    return out


def _geometry(c: Candidate) -> tuple[int, int, int, int, int]:
    d = c.descriptor
    return (
        d.packed_capacity + d.prefill_capacity,
        d.batch_capacity,
        d.token_capacity,
        d.proposal_depth,
        d.prefill_capacity,
    )


class _Bound:
    """Cheap upper bounds on any optimistic candidate's score."""

    def __init__(
        self,
        population: Population,
        ordinary: LaneTable,
        history_of: HistoryOf,
        decision: Decision,
        max_depth: int,
        max_batch: int,
    ) -> None:
        self.decision = decision
        self.views = population.decoders
        self.fixed = ordinary.fixed
        alpha, deepest_rows = decision.alpha, max_depth + 1
        self.outputs, self.limits, self.prices = [], [], []
        deepest = []
        for v, fixed in zip(self.views, self.fixed, strict=True):
            outputs = history_of(v.handle).optimistic_outputs(max_depth, alpha)
            limit = min(v.remaining_output, v.remaining_context, v.max_rows)
            price = v.prices.output_token
            self.outputs.append(outputs)
            self.limits.append(limit)
            self.prices.append(price)
            if limit >= 1:
                deepest.append(fixed + price * outputs[min(limit, deepest_rows)])
        self.loose = [0.0]
        for value in heapq.nlargest(max_batch, deepest):
            self.loose.append(self.loose[-1] + value)
        self.sigmas = sorted((v.sigma_ms or 0.0 for v in self.views), reverse=True)
        self.prompt_price = max((v.prices.prefill_token for v in population.prompts), default=0.0)
        self.prompt_output = max(
            (v.prices.output_token + v.prices.delivery for v in population.prompts), default=0.0
        )
        self._tops: dict[tuple[int, int], float] = {}

    def _top(self, cap: int, batch: int) -> float:
        found = self._tops.get((cap, batch))
        if found is None:
            values = [
                fixed + price * outputs[min(cap, limit)]
                for fixed, price, outputs, limit in zip(
                    self.fixed, self.prices, self.outputs, self.limits, strict=True
                )
                if limit >= 1
            ]
            found = self._tops[(cap, batch)] = sum(heapq.nlargest(batch, values))
        return found

    def _score(self, d: Descriptor, t_ms: float, value: float) -> float:
        batch = min(d.batch_capacity, len(self.views))
        value += self.decision.age_value(sum(self.sigmas[:batch]), 0.0, t_ms)
        if d.is_mixed:
            # every prompt lane may finish its prompt (issue 39)
            value += self.prompt_price * d.prefill_capacity + self.prompt_output * d.prompt_lanes
        return value / t_ms - self.decision.waiting_cost(t_ms)

    def can_beat(self, d: Descriptor, t_ms: float, score: float) -> bool:
        batch = min(d.batch_capacity, len(self.loose) - 1)
        if self._score(d, t_ms, self.loose[batch]) <= score:
            return False
        cap = d.verify_rows
        return self._score(d, t_ms, self._top(cap, d.batch_capacity)) > score


def ranks_before(a: Probe, b: Probe) -> bool:
    """Higher gain first; equal gains prefer the least-informed added prefix, then the
    shorter execution, then the smaller physical geometry."""
    if abs(a.gain - b.gain) > RELATIVE_TIE * max(1.0, abs(a.gain), abs(b.gain)):
        return a.gain > b.gain
    if a.least_weight != b.least_weight:
        return a.least_weight < b.least_weight
    if a.candidate.duration_ns != b.candidate.duration_ns:
        return a.candidate.duration_ns < b.candidate.duration_ns
    return _geometry(a.candidate) < _geometry(b.candidate)


def choose_probe(
    winner: Candidate,
    shapes: Sequence[tuple[Descriptor, bool]],
    population: Population,
    ordinary: Tables,
    costs: CostModel,
    decision: Decision,
    now_ns: int,
    mode: SpeculationMode,
    max_depth: int,
    history_of: HistoryOf,
) -> Probe | None:
    """The best acceptance probe against the ordinary ``winner``, or None."""
    if mode is SpeculationMode.FIXED or winner.is_indeterminate or max_depth == 0:
        return None
    shapes = [(d, only) for d, only in shapes if d.speculation_enabled and d.proposal_depth > 0]
    if not shapes or not population.decoders:
        return None
    shapes = [(d, only) for d, only in shapes if costs.freshness(d, now_ns) is Freshness.FRESH]
    survivals = [history_of(v.handle).optimistic_survivals(max_depth) for v in population.decoders]
    decoders = LaneTable(population.decoders, decision, max_depth, survivals)
    tables = Tables(ordinary.prompts, decoders)
    depths = ordinary_depths(winner)
    best: Probe | None = None
    for d, decode_only in shapes:
        for c in candidates_for(d, tables, costs, decision, now_ns, mode, decode_only):
            if c.score <= winner.score:
                continue
            weights = added_prefix_weights(c, depths, history_of)
            if not weights:
                continue
            probe = Probe(c, (c.score - winner.score) / c.duration_ms, min(weights))
            if best is None or ranks_before(probe, best):
                best = probe
    return best
