"""Stranded prompt tails (issue 10, table C: retention must not lose).

On a MoE roofline a launch costs nearly the same whatever its prompt size, so a chunk
two tokens short of the prompt end out-rates the graph that finishes it and leaves a
2-token tail worth a whole launch. helios/tails.py scores such a chunk by the sequence
it starts; these tests check that sentence and its limits.
"""

from __future__ import annotations

import pytest
from helios_helpers import MS, decode, prefill, request, scheduler

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios import PolicyConfig
from ignition.helios.decide.projection import build_population
from ignition.helios.decide.state_choice import state_candidates
from ignition.helios.decide.tails import CompletionTimes

# A launch floor dominated by expert weights (simulate/devices.py H200Roofline, rounded).
MOE_MS = {prefill(64): 39.0, prefill(128): 50.0, prefill(256): 53.6, decode(1): 3.4}
# With beta = 1 an output token is worth one prompt token: the output the finishing
# graph adds cannot pay for its extra duration, the case where a tail gets stranded.
FLAT_OUTPUT = PolicyConfig(output_token_value=1.0)


def _first_prompt_plan(costs: dict, prompt: int):
    s = scheduler(costs, costs, policy=FLAT_OUTPUT)
    s.admit(request(prompt=prompt, output=8))
    plan = s.plan()
    assert plan is not None and plan.kind is GraphKind.PREFILL
    return plan


def test_a_chunk_stranding_a_tail_one_graph_could_finish_is_worth_no_more_than_its_sequence():
    plan = _first_prompt_plan(MOE_MS, 130)
    assert plan.descriptor == prefill(256)
    assert plan.lanes[0].num_prompt_tokens == 130 and plan.lanes[0].max_advance_tokens == 1


def test_a_chunk_still_wins_when_its_sequence_out_rates_the_graph_covering_the_prompt():
    # a chunk then its tail (39 + 50 ms either way round) beats one 110-ms graph
    costly_cover = {**MOE_MS, prefill(256): 110.0}
    plan = _first_prompt_plan(costly_cover, 130)
    assert plan.descriptor != prefill(256)
    assert plan.lanes[0].num_prompt_tokens < 130 and plan.lanes[0].max_advance_tokens == 0


def test_a_prompt_no_graph_holds_whole_is_chunked_by_plain_rate():
    plan = _first_prompt_plan(MOE_MS, 300)
    assert plan.descriptor == prefill(256)
    assert plan.lanes[0].num_prompt_tokens == 256


def test_the_tail_is_priced_with_the_fastest_measured_graph_holding_it():
    s = scheduler(MOE_MS, MOE_MS)
    times = CompletionTimes(s.descriptors, s.costs)
    assert times.largest == 256
    assert times.ms_for(2) == pytest.approx(39.0)
    assert times.ms_for(65) == pytest.approx(50.0)
    assert times.ms_for(257) is None
    assert s.costs.estimate_ns(prefill(64)) == 39 * MS


RESTORE = Descriptor(GraphKind.RESTORE, 1, 0, 1, 1)
# The 256-token graph holds the restored remainder but is too slow to follow the restore.
RESTORE_MS = {**MOE_MS, prefill(256): 400.0, RESTORE: 0.3}


def _restore_candidate(costs: dict):
    s = scheduler(costs, costs, policy=FLAT_OUTPUT)
    s.admit(request(prompt=1154, output=8, restore_tokens=1024))  # a 130-token remainder
    population, decision = build_population(
        s.requests, s.queue, s.descriptors, s.costs, s.policy, s.now_ns, s._max_depth
    )
    found = state_candidates(
        (*s.descriptors, *s.state_descriptors), population, s.costs, decision, s.policy, s.now_ns
    )
    assert [c.descriptor for c in found] == [RESTORE]
    return found[0], population.pending[0], decision


def test_a_restore_whose_following_chunk_strands_a_tail_scores_no_higher_than_the_sequence():
    """A restore whose following 128-token chunk would strand a 2-token tail scores no
    higher than the sequence restore, chunk, then the fastest graph holding the tail."""
    candidate, view, decision = _restore_candidate(RESTORE_MS)
    assert view.remaining_prompt == 130
    p = view.prices
    chunk = p.prefill_token * 128
    plain = chunk / (0.3 + 50.0) - decision.waiting_cost(0.3 + 50.0)
    sequence_ms = 0.3 + 50.0 + 39.0  # the 2-token tail's fastest graph is the 64-token one
    tail = p.prefill_token * 2 + p.output_token + p.delivery
    sequence = (chunk + tail) / sequence_ms - decision.waiting_cost(sequence_ms)
    assert sequence < plain
    assert candidate.score <= sequence * (1 + 1e-12)


def test_a_restore_whose_following_graph_finishes_the_prompt_keeps_its_pair_score():
    costs = {**RESTORE_MS, prefill(256): 53.6}  # now the covering graph follows the restore
    candidate, view, decision = _restore_candidate(costs)
    p = view.prices
    whole = p.prefill_token * 130 + p.output_token + p.delivery
    pair = whole / (0.3 + 53.6) - decision.waiting_cost(0.3 + 53.6)
    assert candidate.score == pytest.approx(pair, rel=1e-12)
