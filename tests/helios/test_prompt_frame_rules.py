"""Two prompt-frame rules (issues 39/40, ``docs/scheduling.md``): a started prompt's
chunks follow one another while every ready decoder stays within the TBT target
(``decide/prompt_runs.py``, ``PolicyConfig.prompt_runs``), and a mixed program carrying
no prompt yields to its generation twin (``decide/generation_twin.py``,
``PolicyConfig.generation_twin``).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from helios_helpers import Driver, decode, mixed, request, scheduler, spec

from ignition.helios import PolicyConfig, SchedulerError
from ignition.helios.decide.generation_twin import twinned_mixed
from ignition.helios.decide.selector import Exhaustive

# 12 decoders: a B = 16 decode frame (20 ms) out-rates a mixed frame carrying them and a
# 2,048-token chunk (70 ms), so under the seed's value decode frames come between chunks
RUN_MS = {decode(16): 20.0, mixed(16, 512): 40.0, mixed(16, 2048): 70.0}
TARGET = PolicyConfig(tbt_target_ms=75.0)
RUNS = replace(TARGET, prompt_runs=True)
REJECTED = float("-inf")


def _started(policy: PolicyConfig, costs: dict = RUN_MS, decoders: int = 12):
    """``decoders`` decoding and an 8,192-token prompt whose first chunk just ran."""
    s = scheduler(costs, costs, policy=policy)
    handles = [s.admit(request(64, 1000)) for _ in range(decoders)]
    driver = Driver(s)
    while not all(s.requests[h].is_decoder for h in handles):
        driver.step()
    prompt = s.admit(request(8192, 8))
    for _ in range(20):
        if s.requests[prompt].prompt_position > 0:
            break
        driver.step()
    assert 0 < s.requests[prompt].prompt_position < 8192
    s.driver = driver
    return s


def _chunks(plan) -> int:
    return sum(lane.num_prompt_tokens for lane in plan.lanes)


def _candidates(s):
    state = replace(s.selection_state(), start_ns=s.now_ns)
    return Exhaustive().evaluate(state).inference


def test_without_the_rule_decode_frames_come_between_a_prompts_chunks():
    s = _started(TARGET)
    assert s.driver.step().descriptor == decode(16)


def test_a_started_prompts_chunks_follow_one_another_with_every_decoder_riding():
    s = _started(RUNS)
    for _ in range(3):
        plan = s.driver.step()
        assert plan.descriptor == mixed(16, 2048) and _chunks(plan) == 2048
        assert sum(1 for lane in plan.lanes if lane.role.value == "decode") == 12


def test_while_a_run_is_open_frames_without_a_prompt_and_smaller_chunks_score_minus_infinity():
    found = _candidates(_started(RUNS))
    plain = [c for c in found if c.descriptor == decode(16)]
    small = [c for c in found if c.descriptor == mixed(16, 512)]
    run = [c for c in found if c.descriptor == mixed(16, 2048) and c.prompt_row >= 0]
    assert plain and all(c.score == REJECTED for c in plain)
    assert small and all(c.score == REJECTED for c in small)
    assert run and all(c.score > REJECTED for c in run)


def test_the_run_chunk_is_the_largest_one_whose_frame_fits_the_target():
    """At 65 ms the 2,048-token frame (70 ms) misses the target where the 512-token one
    (40 ms) fits: the run goes on in 512-token chunks rather than decode frames."""
    s = _started(replace(RUNS, tbt_target_ms=65.0))
    plan = s.driver.step()
    assert plan.descriptor == mixed(16, 512) and _chunks(plan) == 512


def test_when_no_chunk_fits_the_target_decode_frames_compete_as_before():
    """At 30 ms no mixed frame fits even right after the decoders delivered."""
    s = _started(replace(RUNS, tbt_target_ms=30.0))
    found = _candidates(s)
    assert all(c.score > REJECTED for c in found if c.descriptor == decode(16))
    assert s.driver.step().descriptor == decode(16)


def test_without_a_tbt_target_the_rule_does_nothing():
    s = _started(PolicyConfig(prompt_runs=True))
    assert s.driver.step().descriptor == decode(16)


# a mixed program measured at fewer rows than its twin was (a cost entry is one median
# whatever a run's active rows): its decode-only cohort looks cheaper
TWIN_MS = {decode(8): 30.0, mixed(8, 64): 26.0, mixed(8, 512): 40.0}


def _decoders_only(policy: PolicyConfig, costs: dict = TWIN_MS):
    s = scheduler(costs, costs, policy=policy)
    handles = [s.admit(request(64, 1000)) for _ in range(6)]
    driver = Driver(s)
    while not all(s.requests[h].is_decoder for h in handles):
        driver.step()
    return [driver.step() for _ in range(4)]


def test_without_the_twin_rule_a_mixed_program_runs_a_decode_only_cohort():
    plans = _decoders_only(PolicyConfig())
    assert all(p.descriptor == mixed(8, 64) and _chunks(p) == 0 for p in plans)


def test_a_mixed_program_carrying_no_prompt_yields_to_its_generation_twin():
    plans = _decoders_only(PolicyConfig(generation_twin=True))
    assert all(p.descriptor == decode(8) and len(p.lanes) == 6 for p in plans)


def test_a_mixed_program_without_a_twin_keeps_its_decode_only_cohort():
    costs = {decode(4): 30.0, mixed(8, 64): 26.0, mixed(8, 512): 40.0}
    plans = _decoders_only(PolicyConfig(generation_twin=True), costs)
    assert all(p.descriptor == mixed(8, 64) and len(p.lanes) == 6 for p in plans)


def test_a_twin_matches_every_generation_capacity():
    """Batch, width, packed capacity, depth, variant and value source all match."""
    narrow, wide = mixed(8, 64), mixed(8, 512, w=3)
    descriptors = [decode(8), spec(8, 3), narrow, wide, mixed(4, 64), mixed(8, 64, w=2)]
    assert twinned_mixed(descriptors) == {id(narrow), id(wide)}
    assert twinned_mixed([spec(8, 3, device=True), spec(8, 3, p=16), wide]) == frozenset()


def test_a_non_boolean_switch_is_refused_with_its_name():
    with pytest.raises(SchedulerError, match="prompt_runs"):
        PolicyConfig(prompt_runs=1)  # type: ignore[arg-type]
    with pytest.raises(SchedulerError, match="generation_twin"):
        PolicyConfig(generation_twin="yes")  # type: ignore[arg-type]
