"""What one decision reads and returns, and the protocol both selections meet."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ignition.components.descriptor import Descriptor
from ignition.helios.config import PolicyConfig, SpeculationMode
from ignition.helios.decide.policy import select
from ignition.helios.decide.refresh import choose_refresh
from ignition.helios.decide.utility import Candidate, Decision
from ignition.helios.plans import ExecutionClass
from ignition.helios.state.acceptance import PrefixHistory
from ignition.helios.state.cost import CostModel, Freshness
from ignition.helios.state.queue import ExecutionQueue
from ignition.helios.state.requests import ScheduledRequest
from ignition.helios.types import RequestHandle


@dataclass(slots=True)
class SelectionState:
    """The scheduler's state as one decision reads it."""

    requests: Mapping[RequestHandle, ScheduledRequest]
    queue: ExecutionQueue
    descriptors: Sequence[Descriptor]  # the schedulable inference shapes
    state_descriptors: Sequence[Descriptor]  # init, restore, snapshot, vision
    costs: CostModel
    policy: PolicyConfig
    speculation: SpeculationMode
    max_depth: int
    now_ns: int
    start_ns: int  # the queue's expected end: the frame starts then
    refresh_open: bool  # the timing-refresh credit is full
    refresh_balance_ns: float
    learning_open: bool  # the acceptance-learning credit is full and no probe searched
    learning_balance_ns: float
    page_shortfall: Callable[[Candidate], int]  # pages a commit needs beyond the free ones
    own_freshness: Callable[[Candidate], Freshness]  # a state operation's own timing
    history_of: Callable[[RequestHandle], PrefixHistory]
    waiting_for_slot: int = 0  # requests waiting for admission (Scheduler.note_waiting)


@dataclass(slots=True)
class Selection:
    """One decision: the winner, the decision it was scored under, its execution class
    and credit, and whether a probe search ran and found nothing (the scheduler then
    waits for a change before searching again: time alone only ages the population)."""

    winner: Candidate
    decision: Decision
    execution_class: ExecutionClass
    credit_ns: float = 0.0
    no_probe: bool = False


class Selector(Protocol):
    def select(self, state: SelectionState) -> Selection | None: ...


class FoundProbe(Protocol):
    @property
    def candidate(self) -> Candidate: ...


def execution_class(
    winner: Candidate,
    decision: Decision,
    s: SelectionState,
    stale_pool: Callable[[], Sequence[Candidate]],
    find_probe: Callable[[], FoundProbe | None],
) -> Selection:
    """The ordinary winner's execution class, the same for both selectors."""
    if s.own_freshness(winner) is Freshness.UNKNOWN:
        return Selection(winner, decision, ExecutionClass.DISCOVERY)
    if s.refresh_open:
        stale = choose_refresh(winner, stale_pool(), s.costs, decision)
        if stale is not None:
            return Selection(stale, decision, ExecutionClass.TIMING_REFRESH, s.refresh_balance_ns)
    if not s.learning_open:
        return Selection(winner, decision, ExecutionClass.ORDINARY)
    probe = find_probe()
    if probe is None:
        return Selection(winner, decision, ExecutionClass.ORDINARY, no_probe=True)
    return Selection(
        probe.candidate, decision, ExecutionClass.ACCEPTANCE_LEARNING, s.learning_balance_ns
    )


def page_feasible(
    winner: Candidate | None,
    states: Sequence[Candidate],
    page_shortfall: Callable[[Candidate], int],
) -> Candidate | None:
    """A winner the free KV pages cannot cover yields to the best state operation that
    fits: a terminal retirement (a preemption's, typically) frees pages, and nothing
    else can until frames complete."""
    if winner is None or not states or page_shortfall(winner) <= 0:
        return winner
    return select([c for c in states if page_shortfall(c) <= 0]) or winner
