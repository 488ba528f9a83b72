"""The packed mixed forward equals running the same rows separately."""

from __future__ import annotations

import random

import pytest
import torch

from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors
from ignition.model.step import run_step
from tests.model.conftest import new_state
from tests.model.helpers import PROMPT_CAPACITY, assert_states_equal, decode_rows, prefill

WIDTH = 3
PROMPT_CHUNK = [11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21]
DECODERS = {1: [40, 41, 42], 2: [7], 3: [99, 98]}  # slot -> query tokens (verify width <= 3)


def _warm_state(config, model):
    """Slot 0 has consumed a first prompt chunk; slots 1-3 have short histories."""
    state = new_state(config)
    prefill(model, state, 0, [1, 5, 9, 3, 8], chunk=64)
    for slot, history in (
        (1, [2, 3, 4, 5, 6, 7, 8, 9, 10]),
        (2, [30, 31]),
        (3, list(range(50, 67))),
    ):
        prefill(model, state, slot, history)
    return state


def _mixed(model, state, prefill_row: int):
    """One packed step: the prompt row at index ``prefill_row`` among the three decoders."""
    rows = [DECODERS[slot] for slot in (3, 1, 2)]
    slots = [3, 1, 2]
    rows.insert(prefill_row, PROMPT_CHUNK)
    slots.insert(prefill_row, 0)
    capacity = PackedCapacity.mixed(4, WIDTH, PROMPT_CAPACITY)
    inputs = PackedInputs.build(capacity, rows, slots, prefill_row=prefill_row, prompt_next_token=5)
    return run_step(model, state, inputs, capacity, SamplingTensors.greedy(4)), slots


def _separate(model, state):
    """The prompt chunk alone, then the decoders alone."""
    capacity = PackedCapacity.mixed(1, 1, PROMPT_CAPACITY)
    inputs = PackedInputs.build(capacity, [PROMPT_CHUNK], [0], prefill_row=0, prompt_next_token=5)
    prompt = run_step(model, state, inputs, capacity, SamplingTensors.greedy(1))
    decode = decode_rows(model, state, [DECODERS[s] for s in (1, 2, 3)], [1, 2, 3], WIDTH)
    logits = {0: prompt.target.logits[: len(PROMPT_CHUNK)]}
    start = 0
    for slot in (1, 2, 3):
        n = len(DECODERS[slot])
        logits[slot] = decode.target.logits[start : start + n]
        start += n
    return logits


def _row_logits(out, slots):
    cu = out.target.meta.cu_query_lens.tolist()
    return {slot: out.target.logits[cu[i] : cu[i + 1]] for i, slot in enumerate(slots)}


def test_packed_mixed_logits_equal_separate_rows(config, model):
    base = _warm_state(config, model)
    mixed_state, separate_state = base.clone(), base.clone()
    mixed, slots = _mixed(model, mixed_state, prefill_row=2)
    separate_logits = _separate(model, separate_state)
    for slot, logits in _row_logits(mixed, slots).items():
        torch.testing.assert_close(logits, separate_logits[slot], atol=1e-4, rtol=1e-4)


def test_packed_mixed_state_equals_separate_rows(config, model):
    base = _warm_state(config, model)
    mixed_state, separate_state = base.clone(), base.clone()
    _mixed(model, mixed_state, prefill_row=1)
    _separate(model, separate_state)
    assert_states_equal(mixed_state, separate_state)


def test_packed_offsets_do_not_depend_on_the_prompt_row_index(config, model):
    base = _warm_state(config, model)
    first, first_slots = _mixed(model, base.clone(), prefill_row=0)
    last, last_slots = _mixed(model, base.clone(), prefill_row=3)
    first_logits, last_logits = _row_logits(first, first_slots), _row_logits(last, last_slots)
    for slot in range(4):
        torch.testing.assert_close(first_logits[slot], last_logits[slot], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_packed_layouts_equal_each_row_alone(config, model, seed):
    """Random query lengths (0 included), inactive rows and prompt row positions."""
    rng = random.Random(seed)
    base = _warm_state(config, model)
    capacity = PackedCapacity.mixed(4, WIDTH, PROMPT_CAPACITY)
    slots = rng.sample([0, 1, 2, 3], 4)
    prefill_row = rng.choice([-1, 0, 1, 2, 3])
    rows, row_slots = [], []
    for index, slot in enumerate(slots):
        length = rng.randint(1, 20) if index == prefill_row else rng.randint(0, WIDTH)
        rows.append([rng.randrange(config.vocab_size) for _ in range(length)])
        row_slots.append(-1 if length and rng.random() < 0.2 and index != prefill_row else slot)
    packed_state = base.clone()
    inputs = PackedInputs.build(capacity, rows, row_slots, prefill_row=prefill_row)
    packed = run_step(model, packed_state, inputs, capacity, SamplingTensors.greedy(4))
    packed_logits = _row_logits(packed, range(4))

    alone_state = base.clone()
    for index, (row, slot) in enumerate(zip(rows, row_slots, strict=True)):
        if not row or slot < 0:
            continue
        is_prompt = index == prefill_row
        alone_capacity = PackedCapacity.mixed(1, WIDTH, PROMPT_CAPACITY if is_prompt else 0)
        alone_inputs = PackedInputs.build(
            alone_capacity, [row], [slot], prefill_row=0 if is_prompt else -1
        )
        alone = run_step(
            model, alone_state, alone_inputs, alone_capacity, SamplingTensors.greedy(1)
        )
        torch.testing.assert_close(
            packed_logits[index], alone.target.logits[: len(row)], atol=1e-4, rtol=1e-4
        )
        assert packed.next_tokens[index] == alone.next_tokens[0]
    assert_states_equal(packed_state, alone_state)


def test_a_prompt_step_projects_only_the_rows_it_samples(config, model):
    """Issue 11: prefill programs compute logits for the sampled rows (each row's last
    position), not [chunk, vocab] for every prompt position; the projection matches."""
    state = new_state(config)
    capacity = PackedCapacity.mixed(4, 1, PROMPT_CAPACITY)
    inputs = PackedInputs.build(capacity, [list(range(5, 37))], [0], prefill_row=0)
    projected: list[int] = []
    hook = model.lm_head.register_forward_hook(
        lambda module, args, output: projected.append(args[0].shape[0])
    )
    try:
        out = run_step(model, state, inputs, capacity, SamplingTensors.greedy(4))
    finally:
        hook.remove()
    assert projected == [capacity.batch_capacity]
    assert int(out.next_tokens[0]) == int(out.target.logits[31].argmax())
