"""Scheduler lifecycle: ownership, epochs, fences, resources and the execution queue."""

from __future__ import annotations

import copy

import pytest
from helios_helpers import MS, Driver, decode, mixed, prefill, records_for, request, scheduler, spec

from ignition.helios import (
    CompletionRecord,
    CompletionReport,
    ConfidenceSidecar,
    ExecutionTiming,
    Fence,
    LaneRole,
    PolicyConfig,
    Resources,
    SchedulerError,
    SelectionReason,
)


def decoding(s, n: int, **kw):
    """Admit n requests and run prefills until all decode."""
    handles = [s.admit(request(64, **kw)) for _ in range(n)]
    driver = Driver(s)
    while any(not s.requests[h].is_decoder for h in handles):
        driver.step()
    return handles, driver


def state_of(s):
    """A structural fingerprint of everything a rejected call must leave alone."""
    requests = {}
    for h, r in s.requests.items():
        history = r.acceptance.history(r.spec.proposal_source)
        requests[h] = (
            r.epoch,
            r.prompt_position,
            r.num_output,
            r.is_finished,
            r.is_cancelled,
            (r.rates.token_rate, r.rates.delivery_rate),
            r.last_output_ns,
            r.last_served_seq,
            tuple(r.inflight),
            r.num_pages,
            tuple(history.survivals(8)),
            tuple(history.weight(d) for d in range(1, 9)),
            r.forecast.means(8),
        )
    costs = {
        k: (e.estimate_ns, e.last_observation_ns, tuple(e.samples))
        for k, e in s.costs._entries.items()
    }
    return copy.deepcopy(
        (
            requests,
            costs,
            s.pool.num_free_pages,
            [f.fence for f in s.queue.frames],
            s._last_fence,
            len(s.trace),
            sorted(s._publishable),
        )
    )


def test_admission_beyond_the_request_slots_is_rejected():
    s = scheduler([prefill(64)], resources=Resources(num_request_slots=2))
    s.admit(request())
    s.admit(request())
    with pytest.raises(SchedulerError, match="no free request slot"):
        s.admit(request())


def test_a_plan_exposes_its_value_rate_and_log_scale():
    s = scheduler([prefill(64)])
    s.admit(request())
    plan = s.plan()
    assert plan.selection_value_rate() > 0
    assert plan.selection_log_scale() <= 0


def test_commit_rejects_a_plan_whose_epochs_moved_and_changes_nothing():
    s = scheduler([decode(1), decode(2), prefill(64)])
    _, driver = decoding(s, 2)
    stale = s.plan()
    driver.step()
    before = state_of(s)
    with pytest.raises(SchedulerError, match="epoch"):
        s.commit(stale, Fence(100))
    assert state_of(s) == before


def test_fences_must_increase():
    s = scheduler([prefill(64)])
    s.admit(request())
    s.commit(s.plan(), Fence(5))
    s.complete(
        Fence(5), CompletionReport(records_for(s.queue.frames[0].plan), ExecutionTiming(MS, MS))
    )
    s.admit(request())
    with pytest.raises(SchedulerError, match="fence 5"):
        s.commit(s.plan(), Fence(5))


def test_a_cancelled_request_cannot_be_committed():
    s = scheduler([prefill(64)])
    h = s.admit(request())
    plan = s.plan()
    s.cancel(h)
    with pytest.raises(SchedulerError):
        s.commit(plan, Fence(1))


def test_cancellation_keeps_the_slot_through_the_last_submitted_fence():
    s = scheduler([prefill(64)], resources=Resources(num_request_slots=1))
    h = s.admit(request())
    plan = s.plan()
    s.commit(plan, Fence(1))
    s.cancel(h)
    assert not s.pool.can_allocate_slot()
    s.complete(Fence(1), CompletionReport(records_for(plan), ExecutionTiming(MS, MS)))
    reused = s.admit(request())
    assert reused.slot == h.slot and reused.generation == h.generation + 1


def test_a_cancelled_request_stops_selection_immediately():
    s = scheduler([prefill(64)])
    h = s.admit(request())
    s.cancel(h)
    assert s.plan() is None


def test_complete_rejects_an_out_of_order_fence():
    s = scheduler([decode(1), decode(2), prefill(64)])
    decoding(s, 1)
    s.commit(s.plan(), Fence(50))
    s.commit(s.plan(), Fence(51))
    with pytest.raises(SchedulerError, match="oldest in flight"):
        s.complete(Fence(51), CompletionReport([], ExecutionTiming(MS)))


@pytest.mark.parametrize(
    "corrupt",
    [
        "missing_lane",
        "wrong_handle",
        "too_many_tokens",
        "prompt_mismatch",
        "no_tokens",
        "negative_token",
    ],
)
def test_malformed_completions_are_rejected_with_no_state_change(corrupt):
    s = scheduler([decode(1), decode(2), prefill(64), spec(2, 3)])
    _handles, _ = decoding(s, 2)
    plan = s.plan()
    s.commit(plan, Fence(99))
    records = records_for(plan, accepted=1)
    lane = plan.lanes[0]
    if corrupt == "missing_lane":
        records = records[:-1]
    elif corrupt == "wrong_handle":
        records[0] = CompletionRecord(plan.lanes[1].handle, 0, (1,))
    elif corrupt == "too_many_tokens":
        records[0] = CompletionRecord(lane.handle, 0, (1,) * (lane.query_length + 1))
    elif corrupt == "prompt_mismatch":
        records[0] = CompletionRecord(lane.handle, 3, (1,))
    elif corrupt == "no_tokens":
        records[0] = CompletionRecord(lane.handle, 0, ())
    else:
        records[0] = CompletionRecord(lane.handle, 0, (-1,))
    before = state_of(s)
    with pytest.raises(SchedulerError):
        s.complete(Fence(99), CompletionReport(records, ExecutionTiming(MS, MS)))
    assert state_of(s) == before


def test_mixed_malformed_prompt_row_is_rejected():
    s = scheduler(
        [mixed(2, 64), decode(1), prefill(64)],
        cost_ms={mixed(2, 64): 1.0, decode(1): 5.0, prefill(64): 5.0},
    )
    decoding(s, 1)
    s.admit(request(64))
    plan = s.plan()
    assert plan.kind.value == "mixed" and plan.prompt_row >= 0
    s.commit(plan, Fence(77))
    records = records_for(plan)
    prompt = plan.lanes[plan.prompt_row]
    records[plan.prompt_row] = CompletionRecord(prompt.handle, prompt.num_prompt_tokens, ())
    before = state_of(s)
    with pytest.raises(SchedulerError, match="prompt row"):
        s.complete(Fence(77), CompletionReport(records, ExecutionTiming(MS, MS)))
    assert state_of(s) == before


def test_commit_rejects_a_plan_that_needs_more_pages_than_are_free():
    s = scheduler([prefill(64)], resources=Resources(num_pages=1, page_size_tokens=16))
    s.admit(request(64))
    plan = s.plan()
    before = state_of(s)
    with pytest.raises(SchedulerError, match="pages"):
        s.commit(plan, Fence(1))
    assert state_of(s) == before


def test_pages_return_when_a_request_finishes():
    s = scheduler([prefill(64), decode(1)], resources=Resources(num_pages=100))
    s.admit(request(64, output=2))
    driver = Driver(s)
    while s.requests:
        driver.step()
    assert s.pool.num_free_pages == 100
    assert s.pool.num_owned_slots == 0


def test_decode_may_occupy_both_frame_slots():
    s = scheduler([decode(1), decode(2), prefill(64)])
    decoding(s, 2)
    s.commit(s.plan(), Fence(10))
    second = s.plan()
    assert second is not None and second.kind.value == "decode"
    s.commit(second, Fence(11))
    assert s.plan() is None
    with pytest.raises(SchedulerError, match="both frame slots"):
        s.commit(second, Fence(12))


def test_host_stops_need_completion_feedback_before_the_requests_next_frame():
    """Host stops require completion feedback: the host finds a stop string only in
    published text, so a request with host stops never has a second frame queued whose
    tokens the stop would drop."""
    s = scheduler([decode(1), decode(2), prefill(64)])
    decoding(s, 1, host_stops=True)
    plan = s.plan()
    assert plan.kind.value == "decode" and plan.requires_empty_window
    s.commit(plan, Fence(10))
    assert s.queue.frames[0].needs_feedback
    assert s.plan() is None
    with pytest.raises(SchedulerError, match="completion feedback"):
        s.commit(plan, Fence(11))


def test_prefill_drains_the_window():
    s = scheduler([decode(1), prefill(64)], cost_ms={decode(1): 50.0, prefill(64): 1.0})
    decoding(s, 1)
    s.admit(request(64))
    s.commit(s.plan(), Fence(10))
    assert s.queue.frames[0].plan.kind.value == "prefill"
    assert s.plan() is None


def test_a_winner_needing_an_empty_window_blocks_lower_value_queueable_work():
    s = scheduler([decode(1), prefill(64)], cost_ms={decode(1): 5.0, prefill(64): 1.0})
    decoding(s, 1)
    s.commit(s.plan(), Fence(10))  # a queued decode
    s.admit(request(64))  # the prefill now outranks another decode
    assert s.plan() is None


def test_unknown_costs_need_an_empty_window_and_feedback():
    s = scheduler([decode(1), decode(2), prefill(64)], cost_ms={decode(1): 1.0, prefill(64): 1.0})
    decoding(s, 2)
    plan = s.plan()
    assert plan.reason is SelectionReason.DISCOVERY and plan.requires_empty_window
    s.commit(plan, Fence(10))
    assert s.plan() is None


def test_commit_rechecks_freshness():
    s = scheduler([decode(1), prefill(64)], policy=PolicyConfig(estimate_ttl_ns=MS // 10))
    _, driver = decoding(s, 1)
    driver.step()  # a fresh decode observation
    s.commit(s.plan(), Fence(10))
    queued = s.plan()
    assert queued is not None and queued.reason is SelectionReason.ORDINARY
    s.advance_to(driver.now + MS // 5)  # the estimate expires before the queued frame ends
    with pytest.raises(SchedulerError, match="empty window"):
        s.commit(queued, Fence(11))


def test_a_plan_committed_after_its_estimate_expired_needs_feedback():
    s = scheduler([decode(1), prefill(64)], policy=PolicyConfig(estimate_ttl_ns=MS // 10))
    _, driver = decoding(s, 1)
    driver.step()
    plan = s.plan()
    assert not plan.requires_empty_window
    s.advance_to(driver.now + MS // 5)
    s.commit(plan, Fence(10))
    assert s.queue.frames[0].needs_feedback
    assert s.plan() is None


def test_an_overrun_suspends_queueing_until_feedback():
    s = scheduler([decode(1), prefill(64)])
    _, driver = decoding(s, 1)
    plan = s.plan()
    s.commit(plan, Fence(10))
    s.advance_to(driver.now + plan.estimated_duration_ns * 3)
    assert s.plan() is None
    s.complete(
        Fence(10), CompletionReport(records_for(plan), ExecutionTiming(plan.estimated_duration_ns))
    )
    assert s.plan() is not None


def test_queued_work_projects_the_planning_start_to_its_expected_end():
    s = scheduler([decode(1), prefill(64)])
    decoding(s, 1)
    first = s.plan()
    s.commit(first, Fence(10))
    second = s.plan()
    assert second.planned_start_ns == first.expected_end_ns


def test_queued_lanes_respect_output_limits():
    s = scheduler([decode(1), prefill(64)])
    s.admit(request(64, output=2))
    Driver(s).step()  # prefill publishes the first output
    s.commit(s.plan(), Fence(10))  # the last output token
    assert s.plan() is None


def test_device_allocated_rounds_complete_with_their_confidence_sidecar():
    d = spec(2, 4, p=5, device=True)
    s = scheduler([d, prefill(64)])
    decoding(s, 2)
    plan = s.plan()
    assert plan.descriptor == d
    s.commit(plan, Fence(10))
    records = [
        CompletionRecord(lane.handle, 0, (1, 2), num_verified_tokens=2) for lane in plan.lanes
    ]
    with pytest.raises(SchedulerError, match="confidence sidecar"):
        s.complete(Fence(10), CompletionReport(records, ExecutionTiming(MS)))
    sidecar = ConfidenceSidecar(
        (tuple((0.9, 0.8, 0.7) for _ in range(2)), tuple((0.9, 0.9, 0.9) for _ in range(2)))
    )
    records = [
        CompletionRecord(lane.handle, 0, (1, 2), num_verified_tokens=n)
        for lane, n in zip(plan.lanes, (3, 2), strict=True)
    ]
    tokens = s.complete(Fence(10), CompletionReport(records, ExecutionTiming(MS), sidecar))
    assert len(tokens) == 4


def test_device_allocation_above_p_is_rejected():
    d = spec(2, 4, p=5, device=True)
    s = scheduler([d, prefill(64)])
    decoding(s, 2)
    plan = s.plan()
    s.commit(plan, Fence(10))
    sidecar = ConfidenceSidecar(
        (tuple((0.9, 0.8, 0.7) for _ in range(2)), tuple((0.9, 0.9, 0.9) for _ in range(2)))
    )
    records = [CompletionRecord(lane.handle, 0, (1,), num_verified_tokens=3) for lane in plan.lanes]
    with pytest.raises(SchedulerError, match="above P"):
        s.complete(Fence(10), CompletionReport(records, ExecutionTiming(MS), sidecar))


def test_every_commit_appends_a_trace_entry():
    s = scheduler([prefill(64), decode(1)])
    s.admit(request(64))
    plan = Driver(s).step()
    entry = s.trace[-1]
    assert entry.kind == "prefill" and entry.token_capacity == 64
    assert entry.lanes[0]["prompt_tokens"] == plan.lanes[0].num_prompt_tokens
    assert entry.reason == "ordinary" and entry.estimated_duration_ns == plan.estimated_duration_ns


def test_a_finishing_prefill_exposes_its_decoder_only_after_completion():
    s = scheduler([prefill(64), decode(1)])
    h = s.admit(request(64))
    plan = s.plan()
    s.commit(plan, Fence(1))
    assert plan.lanes[0].role is LaneRole.PROMPT
    assert s.plan() is None
    s.complete(Fence(1), CompletionReport(records_for(plan), ExecutionTiming(MS, MS)))
    assert s.requests[h].is_decoder


def test_a_failed_device_round_of_cancelled_requests_completes_without_tokens():
    d = spec(2, 4, p=5, device=True)
    s = scheduler([d, prefill(64)])
    decoding(s, 2)
    plan = s.plan()
    s.commit(plan, Fence(10))
    for lane in plan.lanes:
        s.cancel(lane.handle)
    empty = tuple((0.0,) * d.proposal_depth for _ in range(d.batch_capacity))
    records = [CompletionRecord(lane.handle) for lane in plan.lanes]
    s.complete(
        Fence(10), CompletionReport(records, ExecutionTiming(0), ConfidenceSidecar((empty, empty)))
    )
    assert not s.requests and s.pool.num_owned_slots == 0
