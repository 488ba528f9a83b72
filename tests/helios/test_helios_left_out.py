"""Decoders a prompt frame leaves out (issue 29; ``ignition/helios/decide/left_out.py``).

On a weight-bound device a frame carrying a prompt chunk costs nearly the same with or
without the decoders beside it, and the decoders it leaves out then need a generation
frame of their own. The rule scores such a frame by the sequence it starts; these tests
check that sentence and its limits.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from helios_helpers import Driver, decode, mixed, prefill, request, scheduler

from ignition.components.program_kinds import GraphKind
from ignition.helios.config import PolicyConfig
from ignition.helios.decide.left_out import CarryTimes
from ignition.helios.decide.selector import Exhaustive

# A MoE launch floor: a 1,024-token chunk costs about a decode frame whatever rides with it.
MOE_MS = {decode(8): 30.0, mixed(2, 1024): 26.6, mixed(8, 1024): 40.0, prefill(1024): 26.0}
DECODERS = 6


def _decoding(costs: dict, rounds: int = 0, policy: PolicyConfig | None = None):
    s = scheduler(costs, costs, policy=policy)
    handles = [s.admit(request(64, 1000)) for _ in range(DECODERS)]
    driver = Driver(s)
    while not all(s.requests[h].is_decoder for h in handles):
        driver.step()
    for _ in range(rounds):
        driver.step()
    s.admit(request(1024, 8))
    return s


def _candidates(s):
    evaluation = Exhaustive().evaluate(replace(s.selection_state(), start_ns=s.now_ns))
    return evaluation.inference, evaluation


RULE_OFF = PolicyConfig(left_out=False)


def _decoders_in(plan) -> int:
    return sum(1 for lane in plan.lanes if lane.role.value == "decode")


@pytest.mark.parametrize("rounds", [0, 10])
def test_a_prompt_frame_carries_the_ready_decoders_a_mixed_program_could_carry(rounds):
    plan = _decoding(MOE_MS, rounds).plan()
    assert plan.descriptor == mixed(8, 1024)
    assert _decoders_in(plan) == DECODERS


@pytest.mark.parametrize("rounds", [0, 10])
def test_without_the_rule_the_one_frame_score_leaves_the_decoders_out(rounds):
    """The case the rule exists for: the chunk alone out-rates the frame carrying them
    (``PolicyConfig.left_out`` off; the test above is the same run with it on)."""
    plan = _decoding(MOE_MS, rounds, RULE_OFF).plan()
    assert plan.descriptor.kind is GraphKind.PREFILL
    assert _decoders_in(plan) == 0


def test_a_frame_leaving_decoders_out_scores_no_higher_than_the_sequence_serving_them():
    s = _decoding(MOE_MS)
    found, evaluation = _candidates(s)
    chunk = next(c for c in found if c.descriptor == prefill(1024))
    decision = evaluation.decision
    plain = chunk.total_value / 26.0 - decision.waiting_cost(26.0)
    carried = sum(max(0.0, v) for _, _, v in evaluation.tables.decoders.order(1)[:DECODERS])
    sequence = (chunk.total_value + carried) / (26.0 + 30.0) - decision.waiting_cost(56.0)
    assert sequence < plain
    assert chunk.score == pytest.approx(sequence, rel=1e-12)


def test_a_frame_carrying_some_decoders_is_charged_for_the_best_of_the_rest():
    s = _decoding(MOE_MS)
    found, evaluation = _candidates(s)
    small = next(c for c in found if c.descriptor == mixed(2, 1024) and c.prompt_row >= 0)
    order = evaluation.tables.decoders.order(1)
    rest = sum(max(0.0, v) for _, _, v in order[1:DECODERS])  # it carries the best one
    assert rest < sum(max(0.0, v) for _, _, v in order[: DECODERS - 1])
    sequence = (small.total_value + rest) / (26.6 + 30.0) - evaluation.decision.waiting_cost(56.6)
    assert small.score == pytest.approx(sequence, rel=1e-12)


def test_a_frame_carrying_every_decoder_keeps_its_one_frame_score():
    s = _decoding(MOE_MS)
    found, evaluation = _candidates(s)
    full = next(c for c in found if c.descriptor == mixed(8, 1024) and c.prompt_row >= 0)
    assert full.num_lanes == 1 + DECODERS
    plain = full.total_value / 40.0 - evaluation.decision.waiting_cost(40.0)
    assert full.score == pytest.approx(plain, rel=1e-12)


def test_without_mixed_programs_no_frame_could_carry_them_and_prefill_keeps_its_score():
    """The seed's knee (a smaller prefill may win because it imposes less waiting) holds
    where no program can carry a decoder beside a prompt: every score is as without it."""
    costs = {decode(8): 30.0, prefill(1024): 26.0, prefill(512): 25.0}
    found, _ = _candidates(_decoding(costs))
    plain, _ = _candidates(_decoding(costs, policy=RULE_OFF))
    scores = sorted((str(c.descriptor), c.score) for c in found)
    assert any(c.descriptor.kind is GraphKind.PREFILL for c in found)
    assert scores == sorted((str(c.descriptor), c.score) for c in plain)


def test_the_left_out_decoders_are_priced_with_the_fastest_measured_generation_program():
    s = scheduler(MOE_MS, MOE_MS)
    times = CarryTimes(s.descriptors, s.costs)
    assert times.carried(1024) == 7 and times.carried(1) == 7 and times.carried(1025) == 0
    assert times.generation_ms(8) == pytest.approx(30.0)
    assert times.generation_ms(9) is None  # no program serves them in one frame: no charge
