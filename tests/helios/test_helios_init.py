"""Initialization as a scheduled prerequisite (design: "Initialization, restore, vision
execution, and intermediate snapshots enable subsequent useful work").

With a prepared init program a fresh request's zero state is a state operation Helios
schedules before its first prompt chunk, through the same candidates as a restore:
the pair lookahead, the cohort rules, optimistic unknown durations.
"""

from __future__ import annotations

import pytest

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios import ExecutionClass, Fence, LaneRole, SchedulerError
from tests.helios.helios_helpers import Driver, decode, mixed, prefill, request, scheduler, spec

INIT = Descriptor(GraphKind.INIT, 1, 0, 1, 1)
RESTORE = Descriptor(GraphKind.RESTORE, 1, 0, 1, 1)
COSTS = {prefill(64): 3.0, decode(1): 2.0, mixed(2, 64): 2.5, INIT: 0.05, RESTORE: 0.3}


def test_with_an_init_program_a_fresh_request_is_initialized_before_its_first_prompt_chunk():
    s = scheduler(COSTS, COSTS)
    h = s.admit(request(prompt=40, output=4))
    driver = Driver(s)
    first = driver.step()
    assert first.kind is GraphKind.INIT
    assert [lane.role for lane in first.lanes] == [LaneRole.INIT]
    assert first.lanes[0].checkpoint_tokens == 0 and s.requests[h].num_pages == 0
    assert s.requests[h].is_initialized and s.requests[h].prompt_position == 0
    second = driver.step()
    assert second.lane_of(h).role is LaneRole.PROMPT


def test_without_an_init_program_a_fresh_request_prefills_at_once():
    costs = {d: ms for d, ms in COSTS.items() if d is not INIT}
    s = scheduler(costs, costs)
    h = s.admit(request(prompt=40, output=4))
    plan = s.plan()
    assert plan.lane_of(h).role is LaneRole.PROMPT


def test_a_restoring_request_needs_no_initialization():
    s = scheduler(COSTS, COSTS)
    h = s.admit(request(prompt=100, output=4, restore_tokens=80))
    plan = s.plan()
    assert plan.kind is GraphKind.RESTORE and plan.lane_of(h).role is LaneRole.RESTORE
    assert s.requests[h].is_initialized


def test_an_unmeasured_init_program_compares_optimistically_by_value():
    costs = {d: ms for d, ms in COSTS.items() if d is not INIT}
    s = scheduler(COSTS, costs)
    s.admit(request(prompt=40, output=4))
    plan = s.plan()
    assert plan.kind is GraphKind.INIT and plan.execution_class is ExecutionClass.DISCOVERY


def test_initialization_enables_the_prompt_row_of_a_following_mixed_graph():
    """The pair lookahead values the init by the mixed graph it enables beside a decoder."""
    s = scheduler(COSTS, COSTS)
    driver = Driver(s)
    a = s.admit(request(prompt=40, output=1000))
    while not s.requests[a].is_decoder:
        driver.step()
    b = s.admit(request(prompt=40, output=4))
    first = driver.step()
    assert first.kind is GraphKind.INIT and first.lane_of(b) is not None
    after = driver.step()
    assert after.kind is GraphKind.MIXED
    assert after.lane_of(b).role is LaneRole.PROMPT and after.lane_of(a).role is LaneRole.DECODE


def test_an_init_plan_for_an_initialized_request_is_refused_at_commit():
    s = scheduler(COSTS, COSTS)
    s.admit(request(prompt=40, output=4))
    driver = Driver(s)
    stale = s.plan()
    driver.step()  # the init runs and completes
    with pytest.raises(SchedulerError):
        s.commit(stale, Fence(99))


def test_an_init_enabling_an_unmeasured_graph_competes_with_discovery_by_useful_value():
    """Unknown durations compare optimistically by useful value: a measured init whose
    following graph is unmeasured ranks with the unknown-duration candidates, so a fresh
    request is not held behind the exploration of programs a running decoder can fill."""
    measured = {prefill(64): 3.0, decode(1): 2.0, mixed(2, 64): 2.5, INIT: 0.05}
    # unmeasured: a speculative round, and a prefill graph a's 40-token prompt never
    # explores (the measured 64-token one consumes the same tokens)
    s = scheduler((*measured, spec(1, 3), prefill(128)), measured)
    driver = Driver(s)
    a = s.admit(request(prompt=40, output=1000))
    while not s.requests[a].is_decoder:
        driver.step()
    b = s.admit(request(prompt=40, output=4))
    plan = s.plan()
    assert plan.kind is GraphKind.INIT and plan.lane_of(b) is not None
    assert plan.estimated_duration_ns == s.costs.estimate_ns(INIT)  # its own, measured T


def test_a_measured_init_ranked_by_value_executes_as_ordinary_work():
    """It discovers nothing of its own cost: accounted and reported as ordinary."""
    s = scheduler(COSTS, {d: ms for d, ms in COSTS.items() if d.kind is not GraphKind.MIXED})
    s.admit(request(prompt=40, output=4))
    plan = s.plan()
    assert plan.kind is GraphKind.INIT
    assert plan.execution_class is ExecutionClass.ORDINARY and plan.reason.value == "ordinary"


def test_an_init_whose_lookahead_is_measured_ranks_by_its_pair_rate():
    s = scheduler(COSTS, COSTS)
    s.admit(request(prompt=40, output=4))
    plan = s.plan()
    assert plan.kind is GraphKind.INIT and plan.execution_class is ExecutionClass.ORDINARY
