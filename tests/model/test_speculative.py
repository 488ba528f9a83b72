"""Greedy speculative decoding yields exactly the tokens of non-speculative greedy decoding."""

from __future__ import annotations

import pytest
import torch

from ignition.model.coupled_verify import VERIFICATION_MODES, use_verification
from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors, target_distribution
from ignition.model.speculative import (
    PromptChunk,
    RoundCapacity,
    RoundInputs,
    speculative_round,
)
from ignition.model.step import run_step
from tests.model.conftest import new_state
from tests.model.helpers import assert_states_equal, decode_rows, greedy_generate, prefill

PROMPTS = {0: [3, 14, 15, 92, 65, 35, 89, 79], 2: [2, 71, 82, 81, 82, 84, 59]}
NUM_TOKENS = 14


@pytest.fixture(scope="module")
def references(config, model):
    """Per slot, the greedy continuation decoded one token per step."""
    return {
        slot: greedy_generate(model, new_state(config), slot, prompt, NUM_TOKENS + 8)
        for slot, prompt in PROMPTS.items()
    }


def _copy_drafts(reference: list[int], emitted: int, depth: int, round_index: int) -> list[int]:
    """The true continuation with one corrupted draft, so accepted lengths vary by round."""
    drafts = reference[emitted : emitted + depth]
    wrong = round_index % (depth + 1)
    if wrong < depth:
        drafts[wrong] = (drafts[wrong] + 1) % 128
    return drafts


def _generate(model, config, capacity, allocation, references=None):
    """Speculative greedy decoding of both prompts side by side in lanes 0 and 1."""
    state = new_state(config)
    slots = list(PROMPTS)
    tokens = {slot: [prefill(model, state, slot, PROMPTS[slot])] for slot in slots}
    depth, width = capacity.proposal_depth, capacity.verify_width
    round_index = 0
    while min(len(t) for t in tokens.values()) < NUM_TOKENS:
        pending = torch.tensor([tokens[s][-1] for s in slots])
        lanes = dict(pending_tokens=pending, slot_ids=torch.tensor(slots, dtype=torch.int32))
        if allocation == "device":
            lanes["lane_ceilings"] = torch.full((2,), min(depth + 1, width), dtype=torch.int32)
        else:
            per_lane = min(depth + 1, width, capacity.packed_capacity // 2)
            lanes["query_lens"] = torch.full((2,), per_lane, dtype=torch.int32)
        if references is not None:
            lanes["supplied_drafts"] = torch.tensor(
                [_copy_drafts(references[s], len(tokens[s]), depth, round_index) for s in slots]
            )
        out = speculative_round(
            model, state, RoundInputs(**lanes), capacity, SamplingTensors.greedy(2), greedy=True
        )
        for lane, slot in enumerate(slots):
            tokens[slot] += [t for t in out.output_tokens[lane].tolist() if t >= 0]
        round_index += 1
    return {slot: t[:NUM_TOKENS] for slot, t in tokens.items()}, round_index


@pytest.mark.parametrize("allocation", ["host", "device"])
def test_greedy_mtp_speculation_matches_greedy_decoding(config, model, references, allocation):
    capacity = RoundCapacity(batch_capacity=2, proposal_depth=3, verify_width=4, packed_capacity=6)
    tokens, _ = _generate(model, config, capacity, allocation)
    assert tokens == {slot: ref[:NUM_TOKENS] for slot, ref in references.items()}


@pytest.mark.parametrize("allocation", ["host", "device"])
def test_greedy_copy_speculation_accepts_drafts_and_matches(config, model, references, allocation):
    capacity = RoundCapacity(batch_capacity=2, proposal_depth=3, verify_width=4, packed_capacity=7)
    tokens, num_rounds = _generate(model, config, capacity, allocation, references)
    assert tokens == {slot: ref[:NUM_TOKENS] for slot, ref in references.items()}
    assert num_rounds < NUM_TOKENS - 1  # accepted drafts shortened the run


def test_fully_rejected_round_leaves_the_state_of_a_round_that_never_proposed(
    config, model, references
):
    base = new_state(config)
    first = prefill(model, base, 0, PROMPTS[0])
    wrong = [(t + 1) % 128 for t in references[0][1:4]]
    proposed, plain = base.clone(), base.clone()
    lanes = dict(
        pending_tokens=torch.tensor([first]), slot_ids=torch.tensor([0], dtype=torch.int32)
    )
    rejected = speculative_round(
        model,
        proposed,
        RoundInputs(
            **lanes,
            query_lens=torch.tensor([4], dtype=torch.int32),
            supplied_drafts=torch.tensor([wrong]),
        ),
        RoundCapacity(1, 3, 4, 4),
        SamplingTensors.greedy(1),
        greedy=True,
    )
    never = speculative_round(
        model,
        plain,
        RoundInputs(**lanes, query_lens=torch.tensor([1], dtype=torch.int32)),
        RoundCapacity(1, 0, 1, 1),
        SamplingTensors.greedy(1),
        greedy=True,
    )
    assert int(rejected.num_accepted[0]) == 0
    assert rejected.output_tokens[0, 0] == never.output_tokens[0, 0]
    assert_states_equal(proposed, plain)


def test_round_reports_the_confidence_sidecar_shape(config, model):
    state = new_state(config)
    first = prefill(model, state, 1, [5, 6, 7])
    capacity = RoundCapacity(batch_capacity=4, proposal_depth=3, verify_width=4, packed_capacity=8)
    out = speculative_round(
        model,
        state,
        RoundInputs(
            pending_tokens=torch.tensor([0, first, 0, 0]),
            slot_ids=torch.tensor([-1, 1, -1, -1], dtype=torch.int32),
            lane_ceilings=torch.full((4,), 4, dtype=torch.int32),
        ),
        capacity,
        SamplingTensors.greedy(4),
        greedy=True,
    )
    assert out.confidence.shape == (2, 4, 3) and out.confidence.dtype == torch.float32
    assert out.query_lens.tolist() == [0, 4, 0, 0]
    joint = out.confidence[0, 1].cumprod(0)
    torch.testing.assert_close(out.confidence[1, 1], joint)


@pytest.mark.parametrize("mode", VERIFICATION_MODES)
def test_sampled_acceptance_preserves_the_target_distribution(config, model, mode):
    """The first emitted token of sampled rounds is distributed as the target's p."""
    with use_verification(mode):
        _check_first_token_distribution(config, model)


def _check_first_token_distribution(config, model):
    num_lanes, repeats, top_k = 48, 12, 4
    state = new_state(config, num_slots=num_lanes)
    prompt = [9, 8, 7, 6, 5]
    first = prefill(model, state, 0, prompt)
    target = decode_rows_logits(model, state.clone(), first)
    base = state.clone()
    params_target = SamplingTensors.build([1.0], top_k=[top_k])
    expected = target_distribution(target[None], params_target)[0]

    capacity = RoundCapacity(num_lanes, 2, 3, num_lanes * 3)
    counts = torch.zeros(config.vocab_size)
    for slot in range(1, num_lanes):
        base.copy_slot(0, slot)
    state = base.clone()
    for repeat in range(repeats):
        seeds = [repeat * num_lanes + lane for lane in range(num_lanes)]
        params = SamplingTensors.build([1.0] * num_lanes, top_k=[top_k] * num_lanes, seed=seeds)
        out = speculative_round(
            model,
            state,
            RoundInputs(
                pending_tokens=torch.full((num_lanes,), first),
                slot_ids=torch.arange(num_lanes, dtype=torch.int32),
                query_lens=torch.full((num_lanes,), 3, dtype=torch.int32),
            ),
            capacity,
            params,
            greedy=False,
        )
        counts += torch.bincount(out.output_tokens[:, 0], minlength=config.vocab_size)
        state = base.clone()
    observed = counts / counts.sum()
    total_variation = (observed - expected).abs().sum() / 2
    assert total_variation < 0.06


def decode_rows_logits(model, state, token):
    out = decode_rows(model, state, [[token]], [0], width=1)
    return out.target.logits[0]


def test_a_lane_drafts_the_same_tokens_whatever_its_neighbours(config, model):
    state = new_state(config)
    first = prefill(model, state, 1, [5, 6, 7])
    prefill(model, state, 3, [8, 9])

    def run(slots):
        lanes = len(slots)
        return speculative_round(
            model,
            state.clone(),
            RoundInputs(
                pending_tokens=torch.full((lanes,), first),
                slot_ids=torch.tensor(slots, dtype=torch.int32),
                query_lens=torch.ones(lanes, dtype=torch.int32),
            ),
            RoundCapacity(lanes, 3, 4, lanes * 4),
            SamplingTensors.greedy(lanes),
            greedy=True,
        )

    alone = run([1])
    beside = run([-1, 1, -1, 3])
    assert alone.draft_tokens[0].tolist() == beside.draft_tokens[1].tolist()
    torch.testing.assert_close(alone.confidence[:, 0], beside.confidence[:, 1])


MIXED_PROMPT = [6, 28, 49, 64, 81, 100, 121, 44, 45, 46]


def test_mixed_round_equals_prompt_then_speculative_lanes_separately(config, model, references):
    """Lanes 0 and 2 speculate (copy drafts accepting 0 and 2), lane 1 is a final prompt chunk."""
    base = new_state(config)
    for slot in (0, 2):
        prefill(model, base, slot, PROMPTS[slot])
    prefill(model, base, 1, MIXED_PROMPT[:4])  # first chunk; the round runs the rest
    pending = {s: references[s][0] for s in (0, 2)}
    drafts = {s: _copy_drafts(references[s], 1, 3, round_index=s) for s in (0, 2)}

    mixed_state = base.clone()
    mixed = speculative_round(
        model,
        mixed_state,
        RoundInputs(
            pending_tokens=torch.tensor([pending[0], 0, pending[2]]),
            slot_ids=torch.tensor([0, 1, 2], dtype=torch.int32),
            query_lens=torch.tensor([4, 0, 4], dtype=torch.int32),
            supplied_drafts=torch.tensor([drafts[0], [0, 0, 0], drafts[2]]),
            prompt=PromptChunk.build(1, MIXED_PROMPT[4:], prefill_capacity=16),
        ),
        RoundCapacity(3, 3, 4, 8, prefill_capacity=16),
        SamplingTensors.greedy(3),
        greedy=True,
    )

    separate_state = base.clone()
    capacity = PackedCapacity.mixed(1, 1, 16)
    prompt_inputs = PackedInputs.build(capacity, [MIXED_PROMPT[4:]], [1], prefill_row=0)
    prompt = run_step(model, separate_state, prompt_inputs, capacity, SamplingTensors.greedy(1))
    separate = speculative_round(
        model,
        separate_state,
        RoundInputs(
            pending_tokens=torch.tensor([pending[0], pending[2]]),
            slot_ids=torch.tensor([0, 2], dtype=torch.int32),
            query_lens=torch.tensor([4, 4], dtype=torch.int32),
            supplied_drafts=torch.tensor([drafts[0], drafts[2]]),
        ),
        RoundCapacity(2, 3, 4, 8),
        SamplingTensors.greedy(2),
        greedy=True,
    )
    assert mixed.output_tokens[1, 0] == prompt.next_tokens[0]
    assert mixed.output_tokens[[0, 2]].tolist() == separate.output_tokens.tolist()
    assert mixed.num_accepted[[0, 2]].tolist() == separate.num_accepted.tolist() == [0, 2]
    assert_states_equal(mixed_state, separate_state)
