"""The five selection defects found in review (issue 9), each pinned by a test."""

from __future__ import annotations

import math

import pytest
from helios_helpers import MS, Driver, decode, prefill, request, scheduler, spec

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios import (
    CompletionRecord,
    CompletionReport,
    ConfidenceSidecar,
    DraftSource,
    ExecutionTiming,
    Fence,
    LaneRole,
    LaneWork,
    PolicyConfig,
    ScheduledPlan,
    SchedulerError,
    SelectionReason,
)
from ignition.helios.config import SpeculationMode
from ignition.helios.decide.service import normalizers, reference_interval_ms

try:  # issue 12 moves the simulator out of Helios into ignition.simulate
    from ignition.simulate.scenario import scenario_from_dict
    from ignition.simulate.sim import simulate
except ImportError:
    from ignition.simulate.scenario import scenario_from_dict
    from ignition.simulate.sim import simulate

NO_PRICES = PolicyConfig(token_fairness=0.0, delivery_fairness=0.0, decode_age_price=0.0)


def batch_prefill(b: int, c: int) -> Descriptor:
    return Descriptor(GraphKind.PREFILL, b, 0, c, b * c)


def value_per_ms(plan: ScheduledPlan) -> float:
    return plan.selection_value_rate() * math.exp(-plan.selection_log_scale())


# -- 1. fixed selection of a constrained ragged graph takes the best cohort fitting B and P


def cohort_reproduction():
    ragged = spec(2, 4, 5)  # host-allocated, B=2, W=4, P=5
    s = scheduler(
        [batch_prefill(4, 64), ragged],
        {batch_prefill(4, 64): 1.0, ragged: 2.0},
        policy=NO_PRICES,
        mode=SpeculationMode.FIXED,
    )
    prior = (0.9, 0.9, 0.9)
    long = s.admit(request(64, 1000, acceptance_prior=prior))
    short = [s.admit(request(64, 3, acceptance_prior=prior)) for _ in range(2)]
    first = Driver(s).step()  # one prefill frame serves all three prompts
    assert first.kind is GraphKind.PREFILL and len(first.lanes) == 3
    assert all(s.requests[h].remaining_output == 2 for h in short)
    return s, long, short


def test_fixed_ragged_selection_takes_the_highest_value_cohort_fitting_b_and_p():
    s, _long, short = cohort_reproduction()
    plan = s.plan()
    assert {lane.handle for lane in plan.lanes} == set(short)
    assert [lane.query_length for lane in plan.lanes] == [2, 2]
    assert value_per_ms(plan) == pytest.approx(121.6)


def test_the_long_lane_alone_would_have_given_less():
    """The greedy choice (the long lane at its full ceiling) is worth 118.4 value/ms."""
    s, long, short = cohort_reproduction()
    for h in short:
        s.cancel(h)
    plan = s.plan()
    assert [lane.handle for lane in plan.lanes] == [long]
    assert value_per_ms(plan) == pytest.approx(118.4)


def test_the_fixed_cohort_choice_is_exact_against_enumeration():
    """A small knapsack over B and P, checked against every subset of mixed lanes."""
    import itertools

    from ignition.helios.decide.rounds import best_fixed_cohort

    values = [9.0, 7.5, 7.0, 4.0, 3.9, 3.0, 2.5]
    ceilings = [4, 3, 3, 2, 2, 1, 1]
    for batch, budget in [(2, 5), (3, 6), (4, 7), (5, 9), (3, 4), (7, 16)]:
        chosen = best_fixed_cohort(values, ceilings, batch, budget)
        best = max(
            sum(values[i] for i in subset)
            for k in range(batch + 1)
            for subset in itertools.combinations(range(len(values)), k)
            if sum(ceilings[i] for i in subset) <= budget
        )
        assert sum(ceilings[i] for i in chosen) <= budget and len(chosen) <= batch
        assert sum(values[i] for i in chosen) == pytest.approx(best)


# -- 2. fixed mode never selects a device-allocated program


def test_a_fixed_mode_scheduler_never_selects_a_device_allocated_program():
    device = spec(2, 4, 5, device=True)
    s = scheduler([prefill(64), device, decode(2)], policy=NO_PRICES, mode=SpeculationMode.FIXED)
    for _ in range(2):
        s.admit(request(64, 50, acceptance_prior=(1.0, 1.0, 1.0)))
    driver = Driver(s)
    kinds = [driver.step().descriptor for _ in range(12)]
    assert device not in kinds
    assert device not in s.descriptors


def test_a_fixed_mode_scheduler_rejects_a_plan_for_a_device_allocated_program():
    device = spec(2, 4, 5, device=True)
    s = scheduler([prefill(64), device, decode(2)], mode=SpeculationMode.FIXED)
    h = s.admit(request(64))
    Driver(s).step()
    lane = LaneWork(h, s.requests[h].epoch, LaneRole.DECODE, 0, 4, 1.0, 1.0, 4, 4, 1.0)
    plan = ScheduledPlan(
        device, (lane,), -1, MS, 0, 1.0, 0.0, SelectionReason.ORDINARY, True, s.now_ns, s.now_ns
    )
    with pytest.raises(SchedulerError, match="not a schedulable program"):
        s.commit(plan, Fence(5))


# -- 3. the reference interval groups streams into families


def test_sigma_of_a_family_of_k_streams_is_k_times_t_over_min_b_k():
    measured = [(decode(1), 2.0), (decode(4), 4.0)]
    # K = 6 delivery-bearing streams, a family of k = 2: T/min(B, 2) is 2/1 for decode(1)
    # and 4/2 for decode(4); sigma = K * 2.0 = 12.
    assert reference_interval_ms(measured, 6, 2) == pytest.approx(12.0)
    # The family of the other four: decode(4) gives 4/4 = 1.0; sigma = 6.
    assert reference_interval_ms(measured, 6, 4) == pytest.approx(6.0)


def test_normalizers_give_each_family_its_own_reference_interval():
    measured = [(decode(1), 2.0), (decode(4), 4.0)]
    norms = normalizers(measured, 6, 6, families={"mtp": 4, "copy": 2})
    assert norms.for_family("mtp").sigma_ms == pytest.approx(6.0)
    assert norms.for_family("copy").sigma_ms == pytest.approx(12.0)
    assert norms.for_family("copy").delivery_rate == pytest.approx(1 / 12.0)


def test_decoders_of_two_proposal_sources_age_against_their_family_sigma():
    s = scheduler(
        [prefill(64), decode(1), decode(4)], {prefill(64): 1.0, decode(1): 2.0, decode(4): 4.0}
    )
    for _ in range(4):
        s.admit(request(64, proposal_source=DraftSource("mtp")))
    for _ in range(2):
        s.admit(request(64, proposal_source=DraftSource("copy")))
    driver = Driver(s)
    while any(not r.is_decoder for r in s.requests.values()):
        driver.step()
    from ignition.helios.decide.projection import build_population

    population, _ = build_population(
        s.requests, s.queue, s.descriptors, s.costs, s.policy, s.now_ns, 0
    )
    sigmas = {v.handle: v.sigma_ms for v in population.decoders}
    for h, r in s.requests.items():
        expected = 6.0 if r.spec.proposal_source.name == "mtp" else 12.0
        assert sigmas[h] == pytest.approx(expected)


# -- 4. a confidence sidecar is [2, request_slots, draft_capacity] of probabilities


def device_round():
    d = spec(2, 4, p=5, device=True)
    s = scheduler([d, prefill(64)])
    for _ in range(2):
        s.admit(request(64))
    driver = Driver(s)
    while any(not r.is_decoder for r in s.requests.values()):
        driver.step()
    plan = s.plan()
    assert plan.descriptor == d
    s.commit(plan, Fence(100))
    records = [CompletionRecord(lane.handle, 0, (1,), num_verified_tokens=1) for lane in plan.lanes]
    return s, d, plan, records


@pytest.mark.parametrize(
    ("planes", "message"),
    [
        ((((0.5,) * 3,) * 2,), "planes"),  # one plane only
        ((((0.5,) * 3,) * 3, ((0.5,) * 3,) * 3), "request slots"),  # 3 rows for B = 2
        ((((0.5,) * 2,) * 2, ((0.5,) * 2,) * 2), "draft capacity"),  # 2 values for D = 3
        ((((0.5, math.nan, 0.5),) * 2, ((0.5,) * 3,) * 2), "probabilities"),
        ((((0.5, 1.5, 0.5),) * 2, ((0.5,) * 3,) * 2), "probabilities"),
    ],
)
def test_a_confidence_sidecar_must_be_two_by_request_slots_by_draft_capacity(planes, message):
    s, _d, _plan, records = device_round()
    sidecar = ConfidenceSidecar(planes)
    with pytest.raises(SchedulerError, match=message):
        s.complete(Fence(100), CompletionReport(records, ExecutionTiming(MS), sidecar))


def test_a_sidecar_of_exactly_two_by_request_slots_by_draft_capacity_is_accepted():
    s, d, _plan, records = device_round()
    plane = tuple((0.5,) * d.proposal_depth for _ in range(d.batch_capacity))
    tokens = s.complete(
        Fence(100),
        CompletionReport(records, ExecutionTiming(MS), ConfidenceSidecar((plane, plane))),
    )
    assert len(tokens) == 2


# -- 5. the simulator keeps one integer nanosecond clock


def test_an_arrival_between_nanoseconds_is_served_and_the_run_does_not_end_early():
    data = {
        "catalog": {"grid": {"prefill": {"token_capacity": [64]}, "decode": {}}},
        "durations": {"formula": {"prefill": {"base_ms": 1.0}, "decode": {"base_ms": 1.0}}},
        "requests": [
            {"arrival_ms": 0.0, "prompt_tokens": 64, "output_tokens": 1},
            {"arrival_ms": 5.0000004, "prompt_tokens": 64, "output_tokens": 4},
        ],
        "preseed_costs": True,
        "noise_sigma": 0.0,
        "end_ms": 100,
    }
    report = simulate(scenario_from_dict(data))
    late = report["requests"][1]
    assert late["first_output_ms"] is not None and late["finish_ms"] is not None
