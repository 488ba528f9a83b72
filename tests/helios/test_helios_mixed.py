"""Mixed execution: one prompt row plus decoders, checked against exhaustive enumeration."""

from __future__ import annotations

import itertools
import math

import pytest
from helios_helpers import Driver, floor_ms, mixed, request, scheduler

from ignition.helios import HEAD_DRAFTS, LaneRole, PolicyConfig, SelectionReason
from ignition.helios.state.acceptance import expected_output
from ignition.helios.state.cost import CostModel

VALUE_ONLY = PolicyConfig(token_fairness=0, delivery_fairness=0, decode_age_price=0)
BETA = VALUE_ONLY.output_token_value
SHAPES = [mixed(2, 64), mixed(4, 64), mixed(4, 128), mixed(2, 64, w=2), mixed(4, 64, w=2)]
ACCEPTANCE = {0: 0.9, 1: 0.5, 2: 0.1}


def population(prompts=(30, 200)):
    s = scheduler(SHAPES, policy=VALUE_ONLY)
    decoders = [s.admit(request(64, acceptance_prior=(ACCEPTANCE[i],))) for i in range(3)]
    driver = Driver(s)
    while not all(s.requests[h].is_decoder for h in decoders):
        driver.step()
    waiting = [s.admit(request(n)) for n in prompts]
    s.driver = driver
    return s, decoders, waiting


def best_by_enumeration(s, decoders, waiting):
    """max over shapes and every legal cohort of useful work / time."""
    best = 0.0
    for d in SHAPES:
        t = s.costs.estimate_ns(d) / 1e6
        decode_values = []
        for h in decoders:
            survivals = s.requests[h].acceptance.history(HEAD_DRAFTS).survivals(1)
            decode_values.append(BETA * expected_output(survivals, d.token_capacity, 1.0))
        prompt_values = [0.0]
        for h in waiting:
            r = s.requests[h]
            left = r.spec.num_prompt_tokens - r.prompt_position
            tokens = min(d.prefill_capacity, left)
            prompt_values.append(tokens + (BETA if tokens == left else 0.0))
        for p, prompt_value in enumerate(prompt_values):
            rows = d.batch_capacity - (1 if p else 0)
            for k in range(0 if p else 1, min(rows, len(decoders)) + 1):
                for cohort in itertools.combinations(decode_values, k):
                    best = max(best, (prompt_value + sum(cohort)) / t)
    return best


def plan_value_per_ms(plan):
    return plan.selection_value_rate() * math.exp(-plan.selection_log_scale())


def test_mixed_selection_matches_exhaustive_useful_work_per_time():
    s, decoders, waiting = population()
    plan = s.plan()
    assert plan_value_per_ms(plan) == pytest.approx(best_by_enumeration(s, decoders, waiting))


def test_mixed_selection_matches_enumeration_for_a_long_prompt():
    s, decoders, waiting = population(prompts=(5000,))
    plan = s.plan()
    assert plan_value_per_ms(plan) == pytest.approx(best_by_enumeration(s, decoders, waiting))


def test_a_fitting_prompt_tail_earns_its_tokens_and_one_output():
    s, _, _ = population(prompts=(30,))
    plan = s.plan()
    assert plan.prompt_row >= 0
    prompt = plan.lanes[plan.prompt_row]
    assert prompt.num_prompt_tokens == 30 and prompt.expected_output_tokens == 1


def test_at_most_one_row_performs_prefill():
    s, _, _ = population(prompts=(30, 40, 50))
    for _ in range(5):
        plan = s.driver.step()
        if plan is None:
            break
        assert sum(lane.role is LaneRole.PROMPT for lane in plan.lanes) <= 1


def test_a_prompt_only_population_is_legal():
    s = scheduler(SHAPES, policy=VALUE_ONLY)
    s.admit(request(100))
    plan = s.plan()
    assert plan.kind.value == "mixed" and len(plan.lanes) == 1 and plan.prompt_row == 0


def test_padding_earns_nothing():
    s = scheduler(
        [mixed(2, 64), mixed(4, 64)], {mixed(2, 64): 1.0, mixed(4, 64): 1.0}, policy=VALUE_ONLY
    )
    s.admit(request(50))
    assert s.plan().descriptor == mixed(2, 64)


def test_speculative_mixed_rows_verify_complete_prefixes():
    shapes = [mixed(4, 64, w=3)]
    s = scheduler(shapes, policy=VALUE_ONLY)
    decoders = [s.admit(request(64, output=100)) for _ in range(2)]
    driver = Driver(s)
    while not all(s.requests[h].is_decoder for h in decoders):
        driver.step()
    s.admit(request(64))
    plan = s.plan()
    rows = [lane.query_length for lane in plan.lanes if lane.role is LaneRole.DECODE]
    assert rows == [3, 3] and plan.prompt_row >= 0


def test_duration_keys_include_prompt_capacity():
    costs = CostModel(10**12)
    costs.observe(mixed(4, 64), 1000, 0)
    assert costs.estimate_ns(mixed(4, 128)) == 0


def test_mixed_shapes_expire_independently():
    s, _, _ = population(prompts=(30,))
    now = s.now_ns + s.policy.estimate_ttl_ns + 1
    s.advance_to(now)
    for d in SHAPES:
        if d != mixed(4, 64, w=2):
            s.costs.observe(d, round(floor_ms(d) * 1e6), now)
    plan = s.plan()
    fresh = [d for d in SHAPES if d != mixed(4, 64, w=2)]
    if plan.descriptor in fresh:
        assert plan.reason is SelectionReason.ORDINARY
    else:
        assert plan.reason is SelectionReason.STALE and plan.requires_empty_window


def test_concurrent_prompt_and_decode_workloads_all_finish():
    s = scheduler(SHAPES)
    handles = [s.admit(request(n, output=20)) for n in (64, 300, 1000, 90)]
    driver = Driver(s)
    for _ in range(400):
        if not s.requests:
            break
        driver.step(accepted=1)
    assert not s.requests and all(h not in s.requests for h in handles)
