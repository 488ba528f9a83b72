"""Every state-operation shape's best candidate, by evaluating all of its work."""

from __future__ import annotations

from collections.abc import Sequence

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios.config import PolicyConfig
from ignition.helios.decide.chains import chain_cohort
from ignition.helios.decide.policy import Population
from ignition.helios.decide.state_candidates import _pair
from ignition.helios.decide.state_rows import (
    ROLES,
    STATE_KINDS,
    _enables,
    _ms,
    _state_lane,
    _terminal_pick,
)
from ignition.helios.decide.state_tables import StateTables
from ignition.helios.decide.terminal import TerminalView
from ignition.helios.decide.utility import Candidate, Decision, LanePick, finish
from ignition.helios.state.cost import CostModel, Freshness


class Best:
    """The best entry of one prerequisite shape: an unknown-duration entry before any
    measured one, then the higher score, then more requests served, then the earlier
    position (the catalog order of the following shape, then the case)."""

    def __init__(self) -> None:
        self.entry: tuple[bool, float, int, tuple, list, list, float] | None = None

    @property
    def known_score(self) -> float | None:
        """The best score when it is a measured rate (None before any, or when an
        unknown-duration entry leads: no measured pair can then replace it)."""
        if self.entry is None or not self.entry[0]:
            return None
        return self.entry[1]

    def consider(self, position, score, lanes, retire, value, known: bool) -> None:
        count = len(lanes) + len(retire)
        best = self.entry
        if (
            best is None
            or (not known and best[0])
            or (
                known == best[0]
                and (
                    score > best[1]
                    or (
                        score == best[1]
                        and (count > best[2] or (count == best[2] and position < best[3]))
                    )
                )
            )
        ):
            self.entry = (known, score, count, position, lanes, retire, value)


def state_tables(
    descriptors: Sequence[Descriptor],
    population: Population,
    costs: CostModel,
    decision: Decision,
    policy: PolicyConfig,
) -> tuple[list[Descriptor], StateTables | None]:
    """The prepared state shapes and the tables their pairs are valued from (None when
    no request awaits a prerequisite or terminal retirement: no state candidate)."""
    if not (population.pending or population.terminal):
        return [], None  # the common case: checked before the catalog is scanned
    state = [d for d in descriptors if d.kind in STATE_KINDS]
    if not state:
        return state, None
    snapshots = [d for d in state if d.kind is GraphKind.SNAPSHOT]
    inference = [d for d in descriptors if d.kind not in STATE_KINDS]
    tables = StateTables(population, inference, snapshots, costs, decision, policy)
    tables.vision = [d for d in state if d.kind is GraphKind.VISION]
    return state, tables


def terminal_alone(
    d: Descriptor,
    tables: StateTables,
    terminal: Sequence[TerminalView],
    t_ms: float | None,
    freshness: Freshness,
    best: Best,
) -> None:
    """Offer terminal retirement alone to ``best``: the snapshot's rows taken by their
    own retirement value (a pair needs a newly ready row)."""
    contributions = tables.terminal_contributions(terminal, t_ms, t_ms)
    order = sorted(range(len(terminal)), key=lambda i: -contributions[i].prefix)
    chosen = order[: d.batch_capacity]
    value = sum(contributions[i].prefix for i in chosen)
    probe = Candidate(d, tables.costs.estimate_ns(d), freshness, value, len(chosen), (), no_lanes)
    finish(probe, tables.decision)
    retire = [terminal[i] for i in chosen]
    best.consider((-1,), probe.score, [], retire, value, t_ms is not None)


def no_lanes() -> tuple[list[LanePick], int]:
    return [], -1


def best_candidate(
    d: Descriptor, tables: StateTables, freshness: Freshness, best: Best
) -> Candidate | None:
    """The candidate of ``d``'s best entry (None: it has none)."""
    if best.entry is None:
        return None
    known, score, count, _, lanes, retire, value = best.entry
    key = (d.kind, tuple(p.view.handle for p in lanes), tuple(r.handle for r in retire))

    def build() -> tuple[list[LanePick], int]:
        return [*lanes, *(_terminal_pick(r) for r in retire)], -1

    if not known:
        freshness = Freshness.UNKNOWN
    candidate = Candidate(d, tables.costs.estimate_ns(d), freshness, value, count, key, build)
    candidate.score = value if freshness is Freshness.UNKNOWN else score
    return candidate


def _shape_candidate(d: Descriptor, tables: StateTables, now_ns: int) -> Candidate | None:
    t_ms = _ms(tables.costs, d)
    freshness = tables.costs.freshness(d, now_ns)
    enabled = [v for v in tables.population.pending if _enables(v, d)]
    chained = [v for v in enabled if v.chained_patches]  # no inference follows directly
    enabled = [v for v in enabled if not v.chained_patches]
    terminal = list(tables.population.terminal) if d.kind is GraphKind.SNAPSHOT else []
    best = Best()
    if terminal:
        terminal_alone(d, tables, terminal, t_ms, freshness, best)
    if enabled:
        for position, following in enumerate(tables.inference):
            _pair(d, tables, position, following, enabled, terminal, t_ms, best)
    if chained:
        chain = chain_cohort(d, tables, chained, t_ms)
        if chain is not None:
            score, rows, value, known = chain
            lanes = [_state_lane(v, ROLES[d.kind]) for v in rows]
            best.consider((len(tables.inference),), score, lanes, [], value, known)
    return best_candidate(d, tables, freshness, best)


def state_candidates(
    descriptors: Sequence[Descriptor],
    population: Population,
    costs: CostModel,
    decision: Decision,
    policy: PolicyConfig,
    now_ns: int,
) -> list[Candidate]:
    """The best candidate of every prepared state-operation shape."""
    state, tables = state_tables(descriptors, population, costs, decision, policy)
    if tables is None:
        return []
    found = (_shape_candidate(d, tables, now_ns) for d in state)
    return [c for c in found if c is not None]
