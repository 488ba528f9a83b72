"""Tie-breaks, projection of queued work, and speculative bookkeeping through the scheduler."""

from __future__ import annotations

import pytest
from helios_helpers import MS, Driver, decode, mixed, prefill, request, scheduler, spec

from ignition.components.descriptor import Descriptor
from ignition.helios import (
    HEAD_DRAFTS,
    CompletionRecord,
    CompletionReport,
    ExecutionTiming,
    Fence,
    LaneRole,
    RequestHandle,
    Resources,
    SchedulerError,
)
from ignition.helios.decide.projection import build_population
from ignition.helios.decide.service import Prices
from ignition.helios.decide.utility import Candidate, LanePick, LaneView, compare
from ignition.helios.state.cost import Freshness


def view(slot: int, last_served: int = 0) -> LaneView:
    return LaneView(
        handle=RequestHandle(slot, 1),
        epoch=0,
        is_decoder=True,
        prompt_position=1,
        num_prompt_tokens=1,
        remaining_output=10,
        remaining_context=100,
        prices=Prices(1.0, 1.0, 0.0),
        age_ms=0.0,
        last_served_seq=last_served,
    )


def candidate(
    d: Descriptor,
    score: float,
    lanes: list[LanePick],
    duration_ns: int = MS,
    freshness: Freshness = Freshness.FRESH,
) -> Candidate:
    c = Candidate(d, duration_ns, freshness, score, len(lanes), (), lambda: (lanes, -1))
    c.score = score
    return c


def lane(v: LaneView) -> LanePick:
    return LanePick(v, LaneRole.DECODE, query_length=1, expected_output=1.0, value=1.0)


def test_an_indeterminate_candidate_ranks_before_a_determinate_one():
    unknown = candidate(decode(2), 0.1, [lane(view(0))], 0, Freshness.UNKNOWN)
    known = candidate(decode(1), 99.0, [lane(view(0))])
    assert compare(unknown, known) < 0


def test_equal_values_prefer_shorter_known_time():
    fast = candidate(decode(1), 5.0, [lane(view(0))], MS)
    slow = candidate(decode(2), 5.0, [lane(view(0))], 2 * MS)
    assert compare(fast, slow) < 0


def test_then_more_served_requests():
    two = candidate(decode(2), 5.0, [lane(view(0)), lane(view(1))])
    one = candidate(decode(1), 5.0, [lane(view(2))])
    assert compare(two, one) < 0


def test_then_less_recently_used_requests():
    old = candidate(decode(1), 5.0, [lane(view(0, last_served=1))])
    recent = candidate(decode(1), 5.0, [lane(view(1, last_served=9))])
    assert compare(old, recent) < 0


def test_then_smaller_physical_padding():
    tight = candidate(decode(1), 5.0, [lane(view(0))])
    padded = candidate(decode(2), 5.0, [lane(view(0))])
    assert compare(tight, padded) < 0


def test_selection_is_bounded_to_64_request_slots():
    with pytest.raises(SchedulerError, match="64"):
        Resources(num_request_slots=65)


def _decoding(s, n, **kw):
    handles = [s.admit(request(64, **kw)) for _ in range(n)]
    driver = Driver(s)
    while any(not s.requests[h].is_decoder for h in handles):
        driver.step()
    return handles, driver


def test_a_queued_delivery_resets_projected_age_to_its_expected_end():
    s = scheduler([decode(1), prefill(64)])
    _decoding(s, 1)
    first = s.plan()
    s.commit(first, Fence(10))
    population, _ = build_population(
        s.requests, s.queue, s.descriptors, s.costs, s.policy, first.expected_end_ns, 0
    )
    assert population.decoders[0].age_ms == 0.0


def test_projection_never_changes_stored_rates():
    s = scheduler([decode(1), prefill(64)])
    (h,), _ = _decoding(s, 1)
    s.commit(s.plan(), Fence(10))
    before = (s.requests[h].rates.token_rate, s.requests[h].rates.delivery_rate)
    s.plan()
    assert (s.requests[h].rates.token_rate, s.requests[h].rates.delivery_rate) == before


def test_mixed_submissions_need_feedback_before_another_graph_is_queued():
    s = scheduler([mixed(2, 64), decode(1)], {mixed(2, 64): 1.0, decode(1): 9.0})
    _decoding(s, 1)
    s.admit(request(64))
    plan = s.plan()
    assert plan.kind.value == "mixed"
    s.commit(plan, Fence(10))
    assert s.plan() is None


def test_width_one_rounds_measure_cost_without_acceptance_observations():
    s = scheduler([spec(1, 1), prefill(64)])
    (h,), driver = _decoding(s, 1)
    weight = s.requests[h].acceptance.history(HEAD_DRAFTS).weight(1)
    plan = driver.step()
    assert plan.descriptor == spec(1, 1)
    assert s.requests[h].acceptance.history(HEAD_DRAFTS).weight(1) == weight
    assert s.costs.freshness(spec(1, 1), s.now_ns) is Freshness.FRESH


def test_a_rejection_lowers_acceptance_at_longer_offered_prefixes():
    s = scheduler([spec(1, 4), prefill(64)])
    (h,), driver = _decoding(s, 1, acceptance_prior=(0.9, 0.9, 0.9))
    driver.step(accepted=1)
    survivals = s.requests[h].acceptance.history(HEAD_DRAFTS).survivals(3)
    assert survivals[0] > 0.9 and survivals[1] < 0.9


def test_termination_censors_the_rest_of_the_round():
    s = scheduler([spec(1, 4), prefill(64)])
    (h,), _ = _decoding(s, 1, acceptance_prior=(0.9, 0.9, 0.9))
    plan = s.plan()
    s.commit(plan, Fence(50))
    tracker = s.requests[h].acceptance.history(HEAD_DRAFTS)
    record = CompletionRecord(h, 0, (1, 2), is_finished=True)
    s.complete(Fence(50), CompletionReport([record], ExecutionTiming(MS)))
    survivals = tracker.survivals(3)
    assert survivals[0] > 0.9
    assert survivals[1:] == (0.9, 0.9)


def test_speculative_reservations_cover_the_ceiling_and_draft_storage():
    s = scheduler([spec(2, 3, d=5), prefill(64)])
    _decoding(s, 2)
    plan = s.plan()
    assert all(lane.reserved_tokens >= plan.descriptor.proposal_depth + 1 for lane in plan.lanes)


def test_the_host_never_charges_output_beyond_the_request_limit():
    s = scheduler([spec(1, 4), prefill(64)])
    (h,), _ = _decoding(s, 1, output=3, acceptance_prior=(0.9, 0.9, 0.9))
    plan = s.plan()
    assert plan.lanes[0].query_length == 2  # two outputs left: a pending row and one draft
    s.commit(plan, Fence(60))
    with pytest.raises(SchedulerError, match="exceed"):
        s.complete(
            Fence(60), CompletionReport([CompletionRecord(h, 0, (1, 2, 3))], ExecutionTiming(MS))
        )


def test_completion_survival_rows_replace_binary_acceptance():
    s = scheduler([spec(1, 3), prefill(64)])
    (h,), _ = _decoding(s, 1, acceptance_prior=(0.5, 0.5))
    plan = s.plan()
    s.commit(plan, Fence(70))
    tracker = s.requests[h].acceptance.history(HEAD_DRAFTS)
    record = CompletionRecord(h, 0, (1,))  # binary: the first draft was rejected
    s.complete(Fence(70), CompletionReport([record], ExecutionTiming(MS), survival=[(0.8, 0.6)]))
    s1, s2 = tracker.survivals(2)
    assert s1 > 0.5 and s2 > 0.5


def test_malformed_survival_rows_are_rejected():
    s = scheduler([spec(1, 3), prefill(64)])
    (h,), _ = _decoding(s, 1, acceptance_prior=(0.5, 0.5))
    plan = s.plan()
    s.commit(plan, Fence(71))
    with pytest.raises(SchedulerError, match="survival"):
        s.complete(
            Fence(71),
            CompletionReport(
                [CompletionRecord(h, 0, (1,))], ExecutionTiming(MS), survival=[(1.5,)]
            ),
        )
