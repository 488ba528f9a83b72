"""Padding rows and query-length-0 rows mutate nothing; snapshot/restore round-trips a slot."""

from __future__ import annotations

import pytest
import torch

from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors
from ignition.model.step import run_step
from tests.model.conftest import new_state
from tests.model.helpers import assert_states_equal, decode_rows, prefill


def _two_histories(config, model):
    state = new_state(config)
    prefill(model, state, 0, [4, 8, 15, 16, 23, 42])
    prefill(model, state, 2, [7, 7, 7])
    return state


def test_query_length_zero_row_and_padding_rows_change_nothing(config, model):
    base = _two_histories(config, model)
    plain, padded = base.clone(), base.clone()
    decode_rows(model, plain, [[5, 6]], [0], width=2)
    # Slot 2 rides along with query length 0; two more rows are unused capacity (slot -1).
    capacity = PackedCapacity.mixed(4, 2, 0)
    inputs = PackedInputs.build(capacity, [[], [5, 6]], [2, 0])
    run_step(model, padded, inputs, capacity, SamplingTensors.greedy(4))
    assert_states_equal(plain, padded)


def test_empty_program_changes_no_slot(config, model):
    base = _two_histories(config, model)
    state = base.clone()
    capacity = PackedCapacity.mixed(2, 2, 16)
    inputs = PackedInputs.build(capacity, [], [])
    out = run_step(model, state, inputs, capacity, SamplingTensors.greedy(2))
    assert out.next_tokens.tolist() == [-1, -1]
    assert_states_equal(base, state)


def test_snapshot_then_restore_round_trips_the_complete_state(config, model):
    state = _two_histories(config, model)
    before = state.clone()
    snapshot = state.snapshot(0)
    decode_rows(model, state, [[1, 2, 3]], [0], width=3)
    assert not torch.equal(state.gdn_state, before.gdn_state)
    state.restore(0, snapshot)
    assert_states_equal(before, state)


def test_restore_then_decode_repeats_the_same_tokens(config, model):
    state = _two_histories(config, model)
    snapshot = state.snapshot(0)
    first = decode_rows(model, state, [[9]], [0], width=1).next_tokens.tolist()
    state.restore(0, snapshot)
    again = decode_rows(model, state, [[9]], [0], width=1).next_tokens.tolist()
    assert first == again


def test_pages_outside_the_cache_are_rejected(config, state):
    with pytest.raises(ValueError, match="outside"):
        state.assign_pages(0, [0, 10_000])


def test_copied_slot_decodes_like_its_source(config, model):
    state = _two_histories(config, model)
    state.copy_slot(0, 3)
    out = decode_rows(model, state, [[9], [9]], [0, 3], width=1)
    torch.testing.assert_close(out.target.logits[0], out.target.logits[1], atol=1e-5, rtol=0)


def test_chunked_prompt_equals_the_prompt_in_one_chunk(config, model):
    prompt = [(7 * i + 3) % 128 for i in range(23)]
    whole, chunked = new_state(config), new_state(config)
    first_whole = prefill(model, whole, 1, prompt)
    first_chunked = prefill(model, chunked, 1, prompt, chunk=5)
    assert first_whole == first_chunked
    assert_states_equal(whole, chunked, atol=1e-4)
