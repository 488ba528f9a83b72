"""Several prompt lanes in one speculative mixed round (issue 39) equal one round per prompt.

Prompts of different lengths, one continuing an earlier chunk, run as the lanes of one
L-lane round beside an MTP-drafting decoder, and one by one in one-lane rounds (the
decoder in a round of its own): every row's tokens and logprobs, every prompt position's
hidden state and every slot's state, MTP draft state included, agree (fp32, greedy).
Padding lanes (no row, or an inactive row) mutate no slot.
"""

from __future__ import annotations

import pytest
import torch

from ignition.model.config import ModelConfig
from ignition.model.round_prompt import PromptChunk
from ignition.model.sampling import SamplingTensors
from ignition.model.speculative import RoundCapacity, RoundInputs, speculative_round
from ignition.model.weights import random_model
from tests.model.conftest import new_state
from tests.model.helpers import assert_states_equal, prefill

LANES = 4
BUCKET = 128  # four lanes of 32 tokens each
DEPTH, WIDTH = 2, 3
# slot -> (tokens already prefilled, this round's chunk, the token after it or -1)
CHUNKS = {
    0: ([], list(range(3, 30)), -1),
    1: (list(range(40, 60)), list(range(60, 92)), 92),
    2: (list(range(100, 105)), [7, 8, 9], -1),
}
DECODER = (3, list(range(60, 70)))  # slot, its prompt (its first output is the pending token)


@pytest.fixture(scope="module", params=["tiny", "tiny_flash_next"])
def setup(request):
    config = getattr(ModelConfig, request.param)()
    return config, random_model(config, seed=0)


def _warm(config, model):
    state = new_state(config)
    for slot, (history, _, _) in CHUNKS.items():
        if history:
            prefill(model, state, slot, history)
    slot, prompt = DECODER
    return state, prefill(model, state, slot, prompt)


def _round(model, state, rows, slots, pending, chunks, lanes, prefill_capacity):
    """One greedy round of len(rows) rows: a decoder row verifies MTP drafts up to W."""
    is_decoder = [r == "decode" for r in rows]
    capacity = RoundCapacity(
        len(rows), DEPTH, WIDTH, WIDTH * len(rows), prefill_capacity, prompt_lanes=lanes
    )
    inputs = RoundInputs(
        pending_tokens=torch.tensor(pending),
        slot_ids=torch.tensor(slots, dtype=torch.int32),
        query_lens=torch.tensor([WIDTH if d else 0 for d in is_decoder], dtype=torch.int32),
        prompt=PromptChunk.lanes(chunks, prefill_capacity, lanes),
    )
    return speculative_round(
        model, state, inputs, capacity, SamplingTensors.greedy(len(rows)), greedy=True
    )


def _together(model, state, pending):
    """Every chunk in one four-lane round: prompts in rows 0, 2, 3, the decoder in row 1,
    an inactive row 4, lane 3 padding."""
    rows = ["prompt", "decode", "prompt", "prompt", "idle"]
    slots = [0, DECODER[0], 1, 2, -1]
    chunks = [(row, CHUNKS[s][1], CHUNKS[s][2]) for row, s in ((0, 0), (2, 1), (3, 2))]
    return _round(model, state, rows, slots, [0, pending, 0, 0, 0], chunks, LANES, BUCKET)


def test_lanes_in_one_round_equal_one_round_each(setup):
    config, model = setup
    base, pending = _warm(config, model)
    together, apart = base.clone(), base.clone()
    out = _together(model, together, pending)
    lane = BUCKET // LANES
    for k, (row, slot) in enumerate(((0, 0), (2, 1), (3, 2))):
        _, chunk, following = CHUNKS[slot]
        alone = _round(model, apart, ["prompt", "idle"], [slot, -1], [0, 0],
                       [(0, chunk, following)], 1, lane)  # fmt: skip
        assert out.output_tokens[row].tolist() == alone.output_tokens[0].tolist()
        torch.testing.assert_close(
            out.prompt_hidden[k * lane : (k + 1) * lane], alone.prompt_hidden, atol=1e-4, rtol=0
        )
        torch.testing.assert_close(
            out.logprobs.logprob[row, 0], alone.logprobs.logprob[0, 0], atol=1e-4, rtol=0
        )
    decoder = _round(model, apart, ["decode", "idle"], [DECODER[0], -1], [pending, 0], [], 1, lane)
    assert out.output_tokens[1].tolist() == decoder.output_tokens[0].tolist()
    assert out.num_accepted[1] == decoder.num_accepted[0]
    assert out.draft_tokens[1].tolist() == decoder.draft_tokens[0].tolist()
    assert out.output_tokens[2, 0] == -1  # a chunk that does not end its prompt emits nothing
    assert out.output_tokens[0, 0] >= 0 and out.output_tokens[3, 0] >= 0
    assert out.query_lens.tolist()[:4] == [27, out.query_lens[1].item(), 32, 3]
    assert_states_equal(together, apart)


def test_padding_lanes_mutate_nothing(setup):
    """Lanes without a row and a lane naming an inactive row (slot -1) leave every slot as
    a one-lane round leaves it."""
    config, model = setup
    base, _ = _warm(config, model)
    padded, single = base.clone(), base.clone()
    chunk = CHUNKS[0][1]
    lane = BUCKET // LANES
    _round(model, padded, ["prompt", "idle", "idle", "idle", "idle"], [0, -1, -1, -1, -1],
           [0] * 5, [(0, chunk, -1), (1, [5, 6], -1)], LANES, BUCKET)  # fmt: skip
    _round(model, single, ["prompt", "idle"], [0, -1], [0, 0], [(0, chunk, -1)], 1, lane)
    assert_states_equal(padded, single, atol=1e-6)
    untouched = base.clone()
    for slot in (1, 2, 3):
        for name in ("gdn_state", "conv_window", "ple_window", "ngram_context", "mtp_hidden"):
            dim = 1 if name in ("gdn_state", "conv_window", "ple_window") else 0
            got = getattr(padded, name).narrow(dim, slot, 1)
            assert torch.equal(got, getattr(untouched, name).narrow(dim, slot, 1)), name
    assert torch.equal(padded.seq_lens[1:4], untouched.seq_lens[1:4])


def test_a_round_refuses_lanes_it_was_not_built_for():
    with pytest.raises(ValueError, match="leave no decoder row"):
        RoundCapacity(4, DEPTH, WIDTH, 12, BUCKET, prompt_lanes=4)
    with pytest.raises(ValueError, match="lane capacity 32"):
        PromptChunk.lanes([(0, list(range(33)), -1)], BUCKET, LANES)
