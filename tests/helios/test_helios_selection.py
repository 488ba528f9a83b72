"""The production selector on measured synthetic catalogs (the seed's policy tests)."""

from __future__ import annotations

import pytest
from helios_helpers import MS, Driver, decode, floor_ms, prefill, request, scheduler, spec

from ignition.helios import PolicyConfig, SelectionReason
from ignition.helios.config import SpeculationMode
from ignition.helios.decide.utility import LaneView, consumable_tokens

PREFILLS = [prefill(c) for c in (64, 128, 256, 512, 1024, 2048, 4096)]


def served(plan):
    return {lane.handle for lane in plan.lanes}


def test_one_long_prefill_takes_the_best_fully_occupied_graph():
    s = scheduler([*PREFILLS, decode(1)])
    s.admit(request(20_000))
    best = max(PREFILLS, key=lambda d: d.token_capacity / floor_ms(d))
    plan = s.plan()
    assert plan.descriptor == best
    assert plan.lanes[0].num_prompt_tokens == best.token_capacity


def _long_prefill(shortfall: int = 0):
    """A 20,000-token prompt; with ``shortfall`` an atomic image span makes its first
    4096-token chunk stop ``shortfall`` tokens early, so that chunk is worth a little
    less: without token fairness the fuller prompts would win every round."""
    if not shortfall:
        return request(20_000)
    return request(20_000, image_spans=((4096 - shortfall, 4100),))


def test_two_long_prefills_alternate_under_token_fairness():
    s = scheduler([*PREFILLS, decode(1)])
    full = s.admit(_long_prefill())
    short = s.admit(_long_prefill(shortfall=1))
    driver = Driver(s)
    assert [served(driver.step()) for _ in range(3)] == [{full}, {short}, {full}]


def test_sixteen_long_prefills_each_progress_before_any_repeats():
    s = scheduler([*PREFILLS, decode(1)])
    handles = [s.admit(_long_prefill(shortfall=i)) for i in range(16)]
    driver = Driver(s)
    seen = [next(iter(served(driver.step()))) for _ in range(16)]
    assert seen == handles  # the fullest chunk first, then each waiting prompt in turn


def test_a_fitting_tail_uses_a_graph_that_consumes_it_without_padding():
    s = scheduler([*PREFILLS, decode(1)])
    s.admit(request(4096 + 64))
    driver = Driver(s)
    assert driver.step().descriptor == prefill(4096)
    tail = driver.step()
    assert tail.descriptor == prefill(64) and tail.lanes[0].num_prompt_tokens == 64


def test_a_large_graph_processing_a_short_tail_earns_only_the_tail():
    s = scheduler([prefill(4096), decode(1)])
    s.admit(request(64))
    lane = s.plan().lanes[0]
    assert lane.num_prompt_tokens == 64 and lane.expected_output_tokens == 1


def test_timing_estimates_cannot_make_redundant_padding_preferable():
    costs = {prefill(128): 3.0, prefill(4096): 1.0, decode(1): 1.0}
    s = scheduler([prefill(128), prefill(4096), decode(1)], costs)
    s.admit(request(100))
    assert s.plan().descriptor == prefill(128)


def test_padded_tails_compete_by_useful_value_rate():
    costs = {prefill(64): 1.0, prefill(128): 1.1, decode(1): 1.0}
    s = scheduler([prefill(64), prefill(128), decode(1)], costs)
    s.admit(request(100))
    assert s.plan().descriptor == prefill(128)  # 100 tokens + first output in 1.1 ms
    costs[prefill(128)] = 3.0
    s = scheduler([prefill(64), prefill(128), decode(1)], costs)
    s.admit(request(100))
    assert s.plan().descriptor == prefill(64)


def _decoders(s, n, **kw):
    handles = [s.admit(request(64, **kw)) for _ in range(n)]
    driver = Driver(s)
    while any(not s.requests[h].is_decoder for h in handles):
        driver.step()
    return handles, driver


SPECS = [spec(b, w) for b in (1, 2, 4) for w in (1, 2, 3, 4, 5, 6, 7, 8)]


def test_high_acceptance_speculates_wider_than_low_acceptance():
    widths = {}
    for p in (0.95, 0.05):
        s = scheduler([*SPECS, prefill(64)])
        _decoders(s, 2, acceptance_prior=(p,) * 7)
        widths[p] = max(lane.query_length for lane in s.plan().lanes)
    assert widths[0.95] == 8 and widths[0.05] < widths[0.95]


def _width_under_alpha(alpha: float):
    """One decoder whose every prefix survives with 0.9, on programs costing 1 ms more per
    proposal depth: the selected lane under ``adaptive_verification_alpha``."""
    policy = PolicyConfig(adaptive_verification_alpha=alpha)
    s = scheduler([*SPECS, prefill(64)], lambda d: 2.0 + d.proposal_depth, policy=policy)
    _decoders(s, 1, acceptance_prior=(0.9,) * 7)
    (lane,) = s.plan().lanes
    return lane


def test_selection_scores_raise_each_prefix_survival_to_the_alpha_exponent():
    lane = _width_under_alpha(2.0)
    assert lane.query_length == 8
    assert lane.expected_output_tokens == pytest.approx(1 + 7 * 0.9**2)


def test_a_larger_alpha_discounts_uncertain_prefixes_into_a_narrower_width():
    assert _width_under_alpha(1.0).query_length == 8
    assert _width_under_alpha(8.0).query_length == 1  # 0.9**8 = 0.43 of an output per ms


def test_low_acceptance_can_choose_the_width_one_program():
    s = scheduler([*SPECS, prefill(64)])
    _decoders(s, 2, acceptance_prior=(0.0,) * 7)
    plan = s.plan()
    assert plan.descriptor.token_capacity == 1 and plan.descriptor.proposal_depth == 0


def test_adaptive_host_allocation_gives_rows_to_the_likelier_prefixes():
    ragged = spec(2, 4, p=5)
    s = scheduler([ragged, prefill(64)])
    likely = s.admit(request(64, acceptance_prior=(0.9, 0.8, 0.7)))
    unlikely = s.admit(request(64, acceptance_prior=(0.2, 0.1, 0.05)))
    driver = Driver(s)
    while not all(s.requests[h].is_decoder for h in (likely, unlikely)):
        driver.step()
    plan = s.plan()
    rows = {lane.handle: lane.query_length for lane in plan.lanes}
    assert sum(rows.values()) <= ragged.packed_capacity
    assert rows[likely] > rows[unlikely]


def test_device_ceilings_are_bounded_per_lane_and_may_sum_above_p():
    ragged = spec(2, 4, p=5, device=True)
    s = scheduler([ragged, prefill(64)])
    _decoders(s, 2, acceptance_prior=(0.9, 0.8, 0.7))
    plan = s.plan()
    ceilings = [lane.query_length for lane in plan.lanes]
    assert ceilings == [4, 4] and sum(ceilings) > ragged.packed_capacity
    assert all(lane.max_advance_tokens <= ragged.packed_capacity for lane in plan.lanes)


def test_fixed_selection_keeps_complete_prefixes_shortened_only_by_request_limits():
    s = scheduler([spec(2, 4), prefill(64)], mode=SpeculationMode.FIXED)
    long = s.admit(request(64, output=100, acceptance_prior=(0.01,) * 3))
    short = s.admit(request(64, output=3, acceptance_prior=(0.01,) * 3))
    driver = Driver(s)
    while not all(s.requests[h].is_decoder for h in (long, short)):
        driver.step()
    rows = {lane.handle: lane.query_length for lane in s.plan().lanes}
    assert rows == {long: 4, short: 2}


def test_heterogeneous_cohorts_take_the_highest_lane_values():
    s = scheduler([decode(2), prefill(64)])
    handles, _ = _decoders(s, 3)
    starved = handles[1]
    for h in handles:
        s.requests[h].rates.token_rate = 1.0
    s.requests[starved].rates.token_rate = 1e-3
    plan = s.plan()
    assert starved in served(plan) and len(plan.lanes) == 2


def test_a_batch_four_serving_three_competes_with_a_batch_two_serving_two():
    for four_ms, expected in ((1.2, decode(4)), (3.0, decode(2))):
        s = scheduler(
            [decode(2), decode(4), prefill(64)],
            {decode(2): 1.0, decode(4): four_ms, prefill(64): 1.0},
        )
        _decoders(s, 3)
        plan = s.plan()
        assert plan.descriptor == expected
        assert len(plan.lanes) == min(3, expected.batch_capacity)


def test_long_decode_pairs_progress_together():
    s = scheduler([decode(1), decode(2), prefill(64)])
    handles, driver = _decoders(s, 2)
    start = {h: s.requests[h].num_output for h in handles}
    for _ in range(50):
        driver.step()
    progress = [s.requests[h].num_output - start[h] for h in handles]
    assert max(progress) - min(progress) <= 1 and min(progress) > 0


ALONE = {
    "token_fairness": PolicyConfig(delivery_fairness=0, decode_age_price=0),
    "delivery_fairness": PolicyConfig(token_fairness=0, decode_age_price=0),
    "decode_age_price": PolicyConfig(token_fairness=0, delivery_fairness=0),
    "none": PolicyConfig(token_fairness=0, delivery_fairness=0, decode_age_price=0),
}


def _unequal_decoders_on_one_row(policy: PolicyConfig) -> str:
    """Two decoders share a one-row width-two program: A may verify a draft (its survival
    estimate shrinks but stays positive), B may not (max_drafts=0), so A's round is always
    worth a little more and the least-recently-used tie-break never applies. Returns who
    each of 80 rounds served."""
    s = scheduler([spec(1, 2), prefill(64)], policy=policy)
    a = s.admit(request(64, acceptance_prior=(0.5,)))
    b = s.admit(request(64, max_drafts=0))
    driver = Driver(s)
    while not all(s.requests[h].is_decoder for h in (a, b)):
        driver.step()
    return "".join("a" if driver.step().lanes[0].handle == a else "b" for _ in range(80))


@pytest.mark.parametrize("preference", ["token_fairness", "delivery_fairness", "decode_age_price"])
def test_each_fairness_preference_alone_keeps_a_less_valuable_decoder_progressing(preference):
    """A request whose rate falls has a rising marginal value, so it cannot be starved
    while f > 0, or for decoders while g > 0 or decode_age_price > 0."""
    assert "b" in _unequal_decoders_on_one_row(ALONE[preference])


def test_without_fairness_or_age_the_more_valuable_decoder_takes_every_round():
    """Setting the coefficients to zero removes the preference: intrinsic throughput alone
    does not ensure starvation freedom (the control for the test above)."""
    assert _unequal_decoders_on_one_row(ALONE["none"]) == "a" * 80


def test_output_gaps_stay_bounded_when_one_lane_serves_two_streams():
    s = scheduler([decode(1), prefill(64)])
    handles, driver = _decoders(s, 2)
    unserved = dict.fromkeys(handles, 0)
    worst = 0
    for _ in range(60):
        plan = driver.step()
        for h in handles:
            unserved[h] = 0 if h in served(plan) else unserved[h] + 1
            worst = max(worst, unserved[h])
    assert worst <= 2


# Near the knee the two prefills' value rates differ by less than the decoders' waiting
# cost. The newcomer rule (docs/scheduling.md) prices a new prompt's tokens above the
# token normalizer's start, so the knee where waiting decides is narrower than it was.
KNEE = {prefill(2048): 10.1, prefill(4096): 20.19, decode(8): 10.0}


def test_with_no_decoder_a_full_large_prefill_wins():
    s = scheduler(list(KNEE), KNEE)
    s.admit(request(20_000))
    assert s.plan().descriptor == prefill(4096)


def test_with_decoders_a_smaller_prefill_wins_near_the_knee():
    s = scheduler(list(KNEE), KNEE)
    _decoders(s, 8, output=10_000)
    s.admit(request(20_000))
    assert s.plan().descriptor == prefill(2048)


def test_age_raises_a_decoders_value_without_forcing_it():
    s = scheduler([decode(1), prefill(64)])
    _handles, driver = _decoders(s, 1)
    fresh = s.plan().selection_value_rate()
    s.advance_to(driver.now + 50 * MS)
    assert s.plan().selection_value_rate() > fresh


def test_an_unknown_candidate_wins_optimistically():
    s = scheduler([decode(1), decode(2), prefill(64)], {decode(1): 1.0, prefill(64): 1.0})
    _decoders(s, 2)
    plan = s.plan()
    assert plan.descriptor == decode(2) and plan.reason is SelectionReason.DISCOVERY


def test_a_lone_cold_request_tries_its_largest_useful_prefill():
    s = scheduler(PREFILLS, cost_ms=None)
    s.admit(request(3000))
    assert s.plan().descriptor == prefill(4096)


def test_exploration_skips_larger_unmeasured_graphs_that_add_nothing_before_the_endpoint():
    s = scheduler(PREFILLS, cost_ms=None)
    s.admit(request(3000, message_endpoints=(100,)))
    plan = s.plan()
    assert plan.descriptor == prefill(128)
    assert plan.reason is SelectionReason.DISCOVERY


def test_measured_larger_graphs_remain_eligible():
    s = scheduler(PREFILLS)
    s.admit(request(3000, message_endpoints=(100,)))
    assert s.plan().lanes[0].num_prompt_tokens > 100


def test_graph_expiry_keeps_ranking_and_recovers_on_observation():
    s = scheduler([decode(1), decode(2), prefill(64)])
    _, driver = _decoders(s, 2)
    s.advance_to(driver.now + s.policy.estimate_ttl_ns + 1)
    driver.now += s.policy.estimate_ttl_ns + 1
    stale = s.plan()
    assert stale.reason is SelectionReason.STALE and stale.requires_empty_window
    assert stale.estimated_duration_ns > 0
    driver.step()
    again = s.plan()
    assert again.descriptor == stale.descriptor and again.reason is SelectionReason.ORDINARY


def test_equal_values_prefer_less_recently_used_requests():
    s = scheduler(
        [decode(1), prefill(64)],
        policy=PolicyConfig(token_fairness=0, delivery_fairness=0, decode_age_price=0),
    )
    _handles, driver = _decoders(s, 2)
    a, b = served(driver.step()), served(driver.step())
    assert a != b


def test_image_spans_stay_within_one_chunk():
    s = scheduler([prefill(64), prefill(128), decode(1)])
    s.admit(request(300, image_spans=((50, 150),)))
    plan = s.plan()
    assert plan.lanes[0].num_prompt_tokens == 50


def test_a_span_larger_than_every_capacity_cannot_be_scheduled():
    view = LaneView(
        handle=None,
        epoch=0,
        is_decoder=False,
        prompt_position=0,
        num_prompt_tokens=300,
        remaining_output=1,
        remaining_context=1000,
        prices=None,
        age_ms=0,
        last_served_seq=0,
        image_spans=((0, 200),),
    )
    assert consumable_tokens(view, 128) == 0
    assert consumable_tokens(view, 256) == 256


def test_throughput_policy_maximizes_committed_value_per_millisecond():
    policy = PolicyConfig(token_fairness=0, delivery_fairness=0, decode_age_price=0)
    costs = {decode(1): 1.0, decode(4): 1.5, prefill(64): 1.0}
    s = scheduler([decode(1), decode(4), prefill(64)], costs, policy=policy)
    _decoders(s, 4)
    s.admit(request(64))
    plan = s.plan()
    # decode(4): 4 * 64 / 1.5 = 170.7 per ms; prefill: (64 + 64) / 1.0 = 128 per ms
    assert plan.descriptor == decode(4)
