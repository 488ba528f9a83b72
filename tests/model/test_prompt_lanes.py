"""Several prompt lanes in one packed program (issue 39) equal one program per prompt.

Prompts of different lengths, some continuing earlier chunks, run as the lanes of one
L-lane program beside a decoder, and one by one in single-lane programs: every row's
logits, sampled token and every slot's state agree (fp32, greedy). Padding lanes (slot
-1 or no row) mutate no slot.
"""

from __future__ import annotations

import pytest
import torch

from ignition.model.config import ModelConfig
from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors
from ignition.model.step import run_step
from ignition.model.weights import random_model
from tests.model.conftest import new_state
from tests.model.helpers import assert_states_equal, prefill

LANES = 4
BUCKET = 128  # four lanes of 32 tokens each
# slot -> (tokens already prefilled, this frame's chunk, the token after it or -1)
CHUNKS = {
    0: ([], list(range(3, 30)), -1),
    1: (list(range(40, 60)), list(range(60, 92)), 92),
    2: (list(range(100, 105)), [7, 8, 9], -1),
}
DECODER = (3, list(range(60, 70)), [71])  # slot, history, its one decode token


@pytest.fixture(scope="module", params=["tiny", "tiny_flash_next"])
def setup(request):
    config = getattr(ModelConfig, request.param)()
    return config, random_model(config, seed=0)


def _warm(config, model):
    state = new_state(config)
    for slot, (history, _, _) in CHUNKS.items():
        if history:
            prefill(model, state, slot, history)
    slot, history, _ = DECODER
    prefill(model, state, slot, history)
    return state


def _one_program(model, state, lanes: int):
    """Every chunk in one L-lane mixed program, the decoder in row 1."""
    rows, slots, prompt_rows, nexts = [], [], [], []
    for slot, (_, chunk, following) in CHUNKS.items():
        if len(rows) == 1:
            rows.append(DECODER[2])
            slots.append(DECODER[0])
        prompt_rows.append(len(rows))
        nexts.append(following)
        rows.append(chunk)
        slots.append(slot)
    capacity = PackedCapacity.mixed(len(rows), 1, BUCKET, lanes)
    inputs = PackedInputs.build(capacity, rows, slots, prompt_rows, nexts)
    out = run_step(model, state, inputs, capacity, SamplingTensors.greedy(len(rows)))
    cu = out.target.meta.cu_query_lens.tolist()
    logits = {s: out.target.logits[cu[i] : cu[i + 1]] for i, s in enumerate(slots)}
    return logits, dict(zip(slots, out.next_tokens.tolist(), strict=True))


def _one_by_one(model, state):
    logits, tokens = {}, {}
    lane = BUCKET // LANES
    for slot, (_, chunk, following) in CHUNKS.items():
        capacity = PackedCapacity.mixed(1, 1, lane)
        inputs = PackedInputs.build(capacity, [chunk], [slot], 0, following)
        out = run_step(model, state, inputs, capacity, SamplingTensors.greedy(1))
        logits[slot] = out.target.logits[: len(chunk)]
        tokens[slot] = int(out.next_tokens[0])
    capacity = PackedCapacity.mixed(1, 1, 0)
    slot, _, token = DECODER
    out = run_step(
        model,
        state,
        PackedInputs.build(capacity, [token], [slot]),
        capacity,
        SamplingTensors.greedy(1),
    )
    logits[slot], tokens[slot] = out.target.logits[:1], int(out.next_tokens[0])
    return logits, tokens


def test_lanes_in_one_program_equal_one_program_each(setup):
    config, model = setup
    base = _warm(config, model)
    together, apart = base.clone(), base.clone()
    logits, tokens = _one_program(model, together, LANES)
    expected_logits, expected_tokens = _one_by_one(model, apart)
    assert tokens == expected_tokens
    assert tokens[1] == -1  # a chunk that does not end its prompt emits nothing
    for slot, expected in expected_logits.items():
        torch.testing.assert_close(logits[slot], expected, atol=1e-4, rtol=1e-4)
    assert_states_equal(together, apart)


def test_padding_lanes_mutate_nothing(setup):
    """Lanes without a row (prefill_row -1) and a lane naming an inactive row (slot -1)
    leave every slot as a one-lane program leaves it."""
    config, model = setup
    base = _warm(config, model)
    padded, single = base.clone(), base.clone()
    chunk = CHUNKS[0][1]
    capacity = PackedCapacity.mixed(3, 1, BUCKET, LANES)
    inputs = PackedInputs.build(capacity, [chunk, [5, 6]], [0, -1], [0, 1, -1, -1])
    run_step(model, padded, inputs, capacity, SamplingTensors.greedy(3))
    one = PackedCapacity.mixed(1, 1, BUCKET // LANES)
    run_step(
        model, single, PackedInputs.build(one, [chunk], [0], 0), one, SamplingTensors.greedy(1)
    )
    assert_states_equal(padded, single, atol=1e-6)
    untouched = base.clone()
    for slot in (1, 2, 3):
        for name in ("gdn_state", "conv_window", "ple_window", "ngram_context", "mtp_hidden"):
            dim = 1 if name in ("gdn_state", "conv_window", "ple_window") else 0
            got = getattr(padded, name).narrow(dim, slot, 1)
            assert torch.equal(got, getattr(untouched, name).narrow(dim, slot, 1)), name
    assert torch.equal(padded.seq_lens[1:4], untouched.seq_lens[1:4])


def test_image_features_land_in_their_lanes_chunk(setup):
    """A feature's position is lane-major (lane l's chunk position j is l * P / L + j): the
    same features at the same chunk positions give the same state in lane 1 of a four-lane
    program as in a one-lane program."""
    config, model = setup
    base = _warm(config, model)
    lanes, single = base.clone(), base.clone()
    features = torch.randn(2, config.hidden_size, generator=torch.Generator().manual_seed(3))
    chunk = CHUNKS[0][1]
    lane = BUCKET // LANES
    capacity = PackedCapacity.mixed(2, 1, BUCKET, LANES)
    inputs = PackedInputs.build(
        capacity, [[5], chunk], [2, 0], [-1, 1], hidden_size=config.hidden_size,
        image_features=features, image_positions=[lane + 3, lane + 4],
    )  # fmt: skip  (lane 0 is padding, lane 1 carries the chunk in row 1)
    out = run_step(model, lanes, inputs, capacity, SamplingTensors.greedy(2))
    one = PackedCapacity.mixed(1, 1, lane)
    alone = PackedInputs.build(
        one, [chunk], [0], 0, hidden_size=config.hidden_size, image_features=features,
        image_positions=[3, 4],
    )  # fmt: skip
    expected = run_step(model, single, alone, one, SamplingTensors.greedy(1))
    got = out.target.logits[1 : 1 + len(chunk)]
    torch.testing.assert_close(got, expected.target.logits[: len(chunk)], atol=1e-4, rtol=1e-4)
