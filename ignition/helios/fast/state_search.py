"""The state operations' search: which (prerequisite, following) pairs to evaluate."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios.config import PolicyConfig
from ignition.helios.decide.chains import chain_cohort, chain_vision, future_delivery_ms
from ignition.helios.decide.policy import Population
from ignition.helios.decide.prerequisites import chain_score
from ignition.helios.decide.state_candidates import _pair
from ignition.helios.decide.state_choice import (
    Best,
    best_candidate,
    state_tables,
    terminal_alone,
)
from ignition.helios.decide.state_rows import (
    ROLES,
    _enables,
    _ms,
    _state_lane,
    decoder_rows,
    following_rows,
)
from ignition.helios.decide.state_tables import StateTables
from ignition.helios.decide.utility import Candidate, Decision, LaneView
from ignition.helios.fast.bounds import BOUND_MARGIN
from ignition.helios.fast.pair_bounds import DecoderRows, PairBounds
from ignition.helios.state.acceptance import expected_output
from ignition.helios.state.cost import CostModel, Freshness


class StateSearch:
    """The state operations' lookahead, resumable so that it and the inference search can each use
    the other's incumbent."""

    def __init__(
        self,
        descriptors: Sequence[Descriptor],
        population: Population,
        costs: CostModel,
        decision: Decision,
        policy: PolicyConfig,
        now_ns: int,
        ready: DecoderRows | None = None,
    ) -> None:
        """``ready``: the decision's ready decoders' bound terms, where the caller keeps
        them between decisions (``population.decoders``'; made here otherwise)."""
        state, tables = state_tables(descriptors, population, costs, decision, policy)
        self._searches: list[_PrerequisiteSearch] = []
        if tables is not None:
            # the ready decoders' bound terms, shared by every prerequisite's pair bounds
            if ready is None:
                ready = DecoderRows(population.decoders, decision)
            self._searches = [_PrerequisiteSearch(d, tables, now_ns, ready) for d in state]

    @property
    def is_empty(self) -> bool:
        """No prerequisite to search (nothing pending, no terminal row): no candidate."""
        return not self._searches

    @property
    def has_ranked_pairs(self) -> bool:
        """Whether some prerequisite has measured pairs left to evaluate."""
        return any(search.leads(-math.inf) for search in self._searches)

    def provisional(self, hint: float | None = -math.inf) -> list[Candidate]:
        """Each prerequisite's best so far after its best-bound pair, where that bound is not
        clearly below ``hint``."""
        out = []
        for search in self._searches:
            if hint is not None and search.leads(hint):
                search.advance(-math.inf, 1)
            candidate = search.candidate()
            if candidate is not None:
                out.append(candidate)
        return out

    def candidates(self, floor: float) -> list[Candidate]:
        """Every prerequisite's candidate, its pairs pruned against ``floor`` (the best
        known score of the other candidates) and the state candidates found so far."""
        out = []
        for search in self._searches:
            candidate = search.finish(floor)
            if candidate is not None:
                out.append(candidate)
                if not candidate.is_indeterminate:
                    floor = max(floor, candidate.score)
        return out


def _below(bound: float, incumbent: float) -> bool:
    """Whether ``bound`` falls clearly below ``incumbent`` (bounds.py's margin: far above
    the ranking's tie tolerance and any rounding between a bound and a real score)."""
    return bound < incumbent - BOUND_MARGIN * max(1.0, abs(incumbent), abs(bound))


def _pair_bounds(
    d: Descriptor,
    tables: StateTables,
    enabled: Sequence[LaneView],
    terminal,
    t_ms: float,
    ready: DecoderRows,
) -> PairBounds:
    contributions = tables.terminal_contributions(terminal, t_ms, None)
    return PairBounds(
        enabled,
        tables.population.prompts,
        ready,
        [c.prefix for c in contributions],
        tables.prices.age_price,
        d.batch_capacity,
        tables.decision,
        tables.max_rows,
    )


class _PrerequisiteSearch:
    """One prerequisite shape's lookahead: terminal retirement alone, every pair with a
    following inference shape, and the chain cohort."""

    def __init__(self, d: Descriptor, tables: StateTables, now_ns: int, ready: DecoderRows) -> None:
        self.d, self.tables = d, tables
        costs = tables.costs
        self.t_ms = t_ms = _ms(costs, d)
        self.freshness = costs.freshness(d, now_ns)
        enabled = [v for v in tables.population.pending if _enables(v, d)]
        # restore -> vision -> inference: no inference follows this stage directly
        self.chained = [v for v in enabled if v.chained_patches]
        if self.chained:
            enabled = [v for v in enabled if not v.chained_patches]
        self.enabled = enabled
        self.terminal = list(tables.population.terminal) if d.kind is GraphKind.SNAPSHOT else []
        self.prune = t_ms is not None
        self.own_only = self.freshness is not Freshness.FRESH
        self.best = Best()
        self._ranked: list[tuple[float, int, Descriptor]] = []
        self._next = 0
        self._built: Candidate | None = None
        self._stale = True  # whether ``_built`` lags ``best``
        if self.terminal:
            terminal_alone(d, tables, self.terminal, t_ms, self.freshness, self.best)
        followings = list(enumerate(tables.inference)) if enabled else []
        if not self.prune:
            for position, following in followings:
                self._pair(position, following)
            return
        measured = []
        durations = tables.shapes.ms
        for position, following in followings:
            f_ms = durations[position]
            if f_ms is None:  # unknown durations compare optimistically by value
                self._pair(position, following)
            else:
                measured.append((position, following, f_ms))
        # an unknown-duration entry already leads: no measured pair can replace it
        if measured and (self.best.entry is None or self.best.known_score is not None):
            assert t_ms is not None
            bounds = _pair_bounds(d, tables, enabled, self.terminal, t_ms, ready)
            self._ranked = bounds.ranked(measured, t_ms, tables.shapes.widths)

    def _pair(self, position: int, following: Descriptor) -> None:
        self._stale = True
        _pair(
            self.d,
            self.tables,
            position,
            following,
            self.enabled,
            self.terminal,
            self.t_ms,
            self.best,
        )

    def leads(self, hint: float) -> bool:
        """Whether the next measured pair's bound is not clearly below ``hint``."""
        return self._next < len(self._ranked) and not _below(-self._ranked[self._next][0], hint)

    def advance(self, floor: float, limit: int | None = None) -> None:
        """Evaluate measured pairs best bound first (at most ``limit``) until the next
        bound falls clearly below both ``floor`` and the best found (the best found
        alone for a stale prerequisite)."""
        if self.own_only:
            floor = -math.inf
        ranked, count = self._ranked, 0
        while self._next < len(ranked) and (limit is None or count < limit):
            negative, position, following = ranked[self._next]
            own = self.best.known_score
            if _below(-negative, floor if own is None else max(floor, own)):
                self._ranked = []  # the bounds only fall: nothing later can rise above
                return
            self._next += 1
            count += 1
            self._pair(position, following)

    def finish(self, floor: float) -> Candidate | None:
        """The shape's candidate: the remaining pairs against ``floor``, then the chain."""
        if self.own_only:
            floor = -math.inf
        self.advance(floor)
        chained = self.chained
        if chained and not (
            self.prune and _chain_skipped(self.d, self.tables, chained, self.t_ms, self.best, floor)
        ):
            chain = chain_cohort(self.d, self.tables, chained, self.t_ms)
            if chain is not None:
                self._stale = True
                score, rows, value, known = chain
                lanes = [_state_lane(v, ROLES[self.d.kind]) for v in rows]
                self.best.consider((len(self.tables.inference),), score, lanes, [], value, known)
        return self.candidate()

    def candidate(self) -> Candidate | None:
        """The candidate of the best entry so far."""
        if self._stale:
            self._built = best_candidate(self.d, self.tables, self.freshness, self.best)
            self._stale = False
        return self._built


def _chain_skipped(
    d: Descriptor,
    tables: StateTables,
    chained: Sequence[LaneView],
    t_ms: float,
    best: Best,
    floor: float,
) -> bool:
    """Whether the chain cohort cannot be selected: every duration behind it is measured
    (so it would rank as a measured rate) and an unknown-duration entry already leads or
    its bound falls clearly below the incumbent."""
    bound = _chain_bound(d, tables, chained, t_ms)
    if bound is None:
        return False
    own = best.known_score
    if best.entry is not None and own is None:
        return True
    return _below(bound, floor if own is None else max(floor, own))


def _chain_bound(
    d: Descriptor, tables: StateTables, chained: Sequence[LaneView], t_ms: float
) -> float | None:
    """An upper bound on the chain cohort's score, None where a duration behind it is unknown."""
    durations = tables.shapes.ms
    if any(m is None for m in durations):
        return None
    prompt_ms = [
        m
        for f, m in zip(tables.inference, durations, strict=True)
        if f.kind in (GraphKind.PREFILL, GraphKind.MIXED)
    ]
    decode_ms = [
        m
        for f, m in zip(tables.inference, durations, strict=True)
        if f.kind in (GraphKind.DECODE, GraphKind.SPECULATIVE)
    ]
    # a decoder's output is largest at the widest decode or speculative following shape
    widest = max(
        (
            following_rows(f)
            for f in tables.inference
            if f.kind in (GraphKind.DECODE, GraphKind.SPECULATIVE)
        ),
        default=1,
    )
    decision = tables.decision
    bounds = []
    for v in chained:
        has_vision, v_ms = chain_vision(tables, v)
        if not has_vision:
            continue  # no vision program holds the window: the row contributes nothing
        if v_ms is None:
            return None
        prices = v.prices
        if v.is_decoder:
            if not decode_ms or v.remaining_output < 1:
                continue
            slope = 0.0
            sigma = future_delivery_ms(v, tables, t_ms, v_ms)
            if sigma is not None and decision.age_price != 0:
                slope = decision.age_price * sigma
            output = expected_output(v.survivals, decoder_rows(v, widest), decision.alpha)
            intercept = prices.output_token * output + prices.delivery + slope * v.age_ms
            bounds.append(intercept * t_ms / (t_ms + v_ms + min(decode_ms)) + slope * t_ms)
        elif prompt_ms:
            value = prices.prefill_token * max(0, v.remaining_prompt)
            value += prices.output_token + prices.delivery
            bounds.append(value * t_ms / (t_ms + v_ms + min(prompt_ms)))
    total = sum(sorted(bounds, reverse=True)[: d.batch_capacity])
    return chain_score([total], t_ms, decision.waiting_coefficient)


def state_candidates(
    descriptors: Sequence[Descriptor],
    population: Population,
    costs: CostModel,
    decision: Decision,
    policy: PolicyConfig,
    now_ns: int,
    floor: float,
) -> list[Candidate]:
    """The best candidate of every prepared state-operation shape that could be selected against
    ``floor``."""
    search = StateSearch(descriptors, population, costs, decision, policy, now_ns)
    return search.candidates(floor)
