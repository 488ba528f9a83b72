"""Issue 40's rules: prompt chunks sized to the TBT target (``decide/chunk_target.py``)
and decoders left out of generation frames (``decide/left_out.py``), both selected by
``PolicyConfig`` fields and on in the ``objective`` preset; the seed's ``balanced``
preset keeps neither.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from helios_helpers import MS, Driver, decode, mixed, prefill, request, scheduler

from ignition.helios import (
    PolicyConfig,
    SchedulerError,
    balanced,
    flat_cadence,
    objective,
    policy_from_preset,
)
from ignition.helios.config import DEFAULT_PRESET
from ignition.helios.decide.selector import Exhaustive

# a MoE-like catalog: a 2,048-token chunk out-rates a 512-token one but takes 90 ms: a
# decoder that last delivered 20 ms ago would wait 110 ms, past a 100 ms target
CHUNK_MS = {decode(8): 30.0, mixed(8, 512): 40.0, mixed(8, 2048): 90.0}
TARGET = PolicyConfig(tbt_target_ms=100.0)


def _with_prompt(
    costs: dict, policy: PolicyConfig, decoders: int = 4, prompt: int = 8192, age_ms: int = 20
):
    """``decoders`` decoding, their last delivery ``age_ms`` ago, and a long prompt."""
    s = scheduler(costs, costs, policy=policy)
    handles = [s.admit(request(64, 1000)) for _ in range(decoders)]
    driver = Driver(s)
    while not all(s.requests[h].is_decoder for h in handles):
        driver.step()
    driver.now += age_ms * MS
    s.advance_to(driver.now)
    s.admit(request(prompt, 8))
    s.driver = driver
    return s


def _prompt_frame(s):
    """The next plan that carries a prompt row."""
    driver = s.driver
    for _ in range(20):
        plan = driver.step()
        if any(lane.role.value == "prompt" for lane in plan.lanes):
            return plan
    raise AssertionError("no prompt frame in 20 plans")


def test_without_a_target_the_largest_chunk_wins_on_value_rate():
    assert _prompt_frame(_with_prompt(CHUNK_MS, balanced())).descriptor == mixed(8, 2048)


def test_a_chunk_whose_frame_breaks_the_decoders_target_is_not_chosen():
    plan = _prompt_frame(_with_prompt(CHUNK_MS, TARGET))
    assert plan.descriptor == mixed(8, 512)
    assert sum(1 for lane in plan.lanes if lane.role.value == "decode") == 4


def test_right_after_the_decoders_delivered_the_larger_chunk_fits_the_target():
    """The target binds as a stream nears it: 0 ms of age plus 90 ms fits 100 ms."""
    plan = _prompt_frame(_with_prompt(CHUNK_MS, TARGET, age_ms=0))
    assert plan.descriptor == mixed(8, 2048)


def test_a_frame_leaving_ready_decoders_out_also_waits_for_their_frame():
    """Beside the B = 2 frame (40 ms, one decoder riding) the three left out then need
    their 30 ms frame: 20 + 40 + 30 > 80, so it is rejected; the frame carrying all four
    (20 + 50) is not."""
    costs = {decode(8): 30.0, mixed(8, 64): 35.0, mixed(2, 512): 40.0, mixed(8, 512): 50.0}
    s = _with_prompt(costs, PolicyConfig(tbt_target_ms=80.0))
    found = Exhaustive().evaluate(replace(s.selection_state(), start_ns=s.now_ns)).inference
    small = [c for c in found if c.descriptor == mixed(2, 512) and c.prompt_row >= 0]
    full = [c for c in found if c.descriptor == mixed(8, 512) and c.prompt_row >= 0]
    assert small and all(c.score == float("-inf") for c in small)
    assert full and all(c.score > float("-inf") and c.num_lanes == 5 for c in full)


def test_the_smallest_chunk_stays_eligible_when_no_chunk_fits():
    plan = _prompt_frame(_with_prompt(CHUNK_MS, PolicyConfig(tbt_target_ms=10.0)))
    assert plan.descriptor == mixed(8, 512)


def test_with_no_decoder_ready_the_target_constrains_nothing():
    s = _with_prompt(CHUNK_MS, TARGET, decoders=0)
    assert s.plan().descriptor == mixed(8, 2048)


def test_a_rejected_chunk_scores_minus_infinity_and_the_rest_keep_their_scores():
    s = _with_prompt(CHUNK_MS, TARGET)
    found = Exhaustive().evaluate(replace(s.selection_state(), start_ns=s.now_ns)).inference
    big = [c for c in found if c.descriptor == mixed(8, 2048) and c.prompt_row >= 0]
    small = [c for c in found if c.descriptor == mixed(8, 512) and c.prompt_row >= 0]
    assert big and all(c.score == float("-inf") for c in big)
    assert small and all(c.score > float("-inf") for c in small)


# generation frames: 20 decoders, a B = 16 frame out-rates the padded B = 32 one, but the
# 4 it leaves out then need a frame of their own
GENERATION_MS = {decode(4): 12.0, decode(16): 18.0, decode(32): 26.0, prefill(64): 5.0}


def _generation_plan(policy: PolicyConfig):
    s = scheduler(GENERATION_MS, GENERATION_MS, policy=policy)
    handles = [s.admit(request(64, 1000)) for _ in range(20)]
    driver = Driver(s)
    while not all(s.requests[h].is_decoder for h in handles):
        driver.step()
    return [driver.step() for _ in range(6)]


def test_without_the_rule_a_generation_frame_leaves_ready_decoders_out():
    plans = _generation_plan(balanced())
    assert any(p.descriptor == decode(16) for p in plans)


def test_a_generation_frame_carries_every_ready_decoder_a_program_could_carry():
    plans = _generation_plan(PolicyConfig(generation_left_out=True))
    assert all(p.descriptor == decode(32) and len(p.lanes) == 20 for p in plans)


def test_the_objective_preset_is_the_default_and_balanced_stays_selectable():
    assert DEFAULT_PRESET == "objective"
    assert policy_from_preset("objective") == objective()
    assert objective().tbt_target_ms > 0 and objective().generation_left_out
    assert objective().prompt_runs and objective().generation_twin
    assert not balanced().prompt_runs and not balanced().generation_twin
    assert objective().cadence_ramp > 0  # issue 40's cadence ramp (test_cadence_ramp.py)
    assert not flat_cadence().generation_left_out and flat_cadence().cadence_ramp == 0
    assert flat_cadence().tbt_target_ms == objective().tbt_target_ms
    assert flat_cadence().prompt_runs and flat_cadence().generation_twin
    assert policy_from_preset("balanced") == PolicyConfig()
    assert balanced().tbt_target_ms == 0 and not balanced().generation_left_out


def test_a_non_boolean_rule_switch_is_refused_with_its_name():
    with pytest.raises(SchedulerError, match="generation_left_out"):
        PolicyConfig(generation_left_out=1)  # type: ignore[arg-type]
    with pytest.raises(SchedulerError, match="tbt_target_ms"):
        PolicyConfig(tbt_target_ms=-1.0)
