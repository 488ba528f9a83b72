"""Snapshot and restore programs round-trip a slot's complete state; initialization
writes what ``reset_slot`` writes, and the build validation checks both."""

from __future__ import annotations

import pytest
import torch

from ignition.compiler import state_ops
from ignition.compiler.graph import GraphCapturer
from ignition.compiler.state_ops import StateOperations, state_scratch_page
from ignition.compiler.validate import ValidationError, validate_state_operations
from ignition.components.state_programs import INIT, RESTORE, SNAPSHOT
from ignition.kernels import use_backend
from ignition.model.config import ModelConfig
from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors
from ignition.model.state import ModelState
from ignition.model.step import run_step
from ignition.model.weights import random_model

PAGE, PER_SLOT = 8, 6


@pytest.fixture(scope="module")
def model():
    return random_model(ModelConfig.tiny(), seed=5)


def new_state(model) -> ModelState:
    # 3 slots x 6 pages, plus the scratch page at the end.
    return ModelState.allocate(model.config, 3, 3 * PER_SLOT + 1, PAGE, PER_SLOT)


def step(model, state, slot: int, tokens: list[int], prompt: bool) -> int:
    capacity = PackedCapacity.mixed(1, 1, 64) if prompt else PackedCapacity.mixed(1, 1, 0)
    inputs = PackedInputs.build(capacity, [tokens], [slot], prefill_row=0 if prompt else -1)
    return int(run_step(model, state, inputs, capacity, SamplingTensors.greedy(1)).next_tokens[0])


def greedy(model, state, slot: int, first: int, n: int) -> list[int]:
    out = [first]
    while len(out) < n:
        out.append(step(model, state, slot, [out[-1]], prompt=False))
    return out


def test_restore_continues_exactly_where_the_snapshot_was_taken(model):
    with use_backend("reference"):
        state = new_state(model)
        ops = StateOperations(state, num_rows=2, capturer=GraphCapturer("cpu"))
        state.assign_pages(0, list(range(0, PER_SLOT)))
        first = step(model, state, 0, [5, 9, 11, 17, 23, 42, 7, 3, 30, 12, 8], prompt=True)
        ops.snapshot(slot=0, row=1)
        original = greedy(model, state, 0, first, 8)
        state.assign_pages(2, list(range(2 * PER_SLOT, 2 * PER_SLOT + 3)))  # partial table
        ops.restore(slot=2, row=1)
        assert int(state.seq_lens[2]) == 11
        resumed = greedy(model, state, 2, first, 8)
    assert resumed == original


def test_snapshot_copies_every_piece_of_state(model):
    state = new_state(model)
    ops = StateOperations(state, num_rows=1, capturer=GraphCapturer("cpu"))
    state.assign_pages(1, [4, 5])
    state.seq_lens[1] = 13
    state.gdn_state[:, 1].normal_()
    state.conv_window[:, 1].normal_()
    state.mtp_hidden[1].normal_()
    for cache in (state.k_cache, state.v_cache, state.mtp_k_cache, state.mtp_v_cache):
        cache[:, 4:6].normal_()
    expected = {
        name: getattr(state, name).clone()
        for name in ("gdn_state", "conv_window", "mtp_hidden", "k_cache")
    }
    ops.snapshot(slot=1, row=0)
    state.assign_pages(0, [9, 10])  # the rest of the table stays unassigned (-1)
    ops.restore(slot=0, row=0)
    assert int(state.seq_lens[0]) == 13
    assert torch.equal(state.gdn_state[:, 0], expected["gdn_state"][:, 1])
    assert torch.equal(state.conv_window[:, 0], expected["conv_window"][:, 1])
    assert torch.equal(state.mtp_hidden[0], expected["mtp_hidden"][1])
    assert torch.equal(state.k_cache[:, 9:11], expected["k_cache"][:, 4:6])
    assert state_scratch_page(state) == 3 * PER_SLOT


def test_rows_and_slots_are_checked(model):
    ops = StateOperations(new_state(model), num_rows=1, capturer=GraphCapturer("cpu"))
    with pytest.raises(ValueError, match="snapshot row 1"):
        ops.snapshot(slot=0, row=1)
    with pytest.raises(ValueError, match="slot 3"):
        ops.restore(slot=3, row=0)


def test_initialization_writes_what_a_reset_slot_writes_and_touches_no_other_slot(model):
    """Initialization is a restore from the zero state (issue 10): the prepared program
    leaves exactly what ``ModelState.reset_slot`` leaves, pages and other slots untouched."""
    state = new_state(model)
    ops = StateOperations(state, num_rows=1, capturer=GraphCapturer("cpu"))
    state.assign_pages(1, [4, 5])
    for slot in (0, 1):
        state.seq_lens[slot] = 7 + slot
        state.gdn_state[:, slot].normal_()
        state.conv_window[:, slot].normal_()
        state.mtp_hidden[slot].normal_()
    other = state.gdn_state[:, 0].clone()
    pages = state.k_cache[:, 4:6].clone()
    ops.initialize(slot=1)
    assert int(state.seq_lens[1]) == 0 and int(state.seq_lens[0]) == 7
    for table in (state.gdn_state[:, 1], state.conv_window[:, 1], state.mtp_hidden[1]):
        assert not table.any()
    assert torch.equal(state.gdn_state[:, 0], other)
    assert torch.equal(state.k_cache[:, 4:6], pages) and int(state.page_table[1][0]) == 4


def _validation_ops(model) -> StateOperations:
    return StateOperations(new_state(model), num_rows=1, capturer=GraphCapturer("cpu"))


def test_the_build_validation_returns_a_result_for_the_init_program_beside_the_others(model):
    results = validate_state_operations(_validation_ops(model))
    assert [r.name for r in results] == [SNAPSHOT.name, RESTORE.name, INIT.name]
    assert all(r.validation_ns > 0 for r in results)


def test_an_init_program_that_leaves_the_conv_window_fails_validation_naming_it(model, monkeypatch):
    """Issue 10: the build validates the init program against ``reset_slot``; one that
    forgets a piece of the state fails with the program's name and the piece."""

    def leaves_conv_window(state):
        def run_init(x):
            slot = x.slot.long()
            state.seq_lens.index_fill_(0, slot, 0)
            state.gdn_state.index_fill_(1, slot, 0)
            state.mtp_hidden.index_fill_(0, slot, 0)
            return state.seq_lens[slot]

        return run_init

    monkeypatch.setattr(state_ops, "init_program", leaves_conv_window)
    with pytest.raises(ValidationError, match=rf"^{INIT.name}: .*conv_window"):
        validate_state_operations(_validation_ops(model))


def test_an_init_program_that_touches_another_slot_fails_validation(model, monkeypatch):
    def zeroes_every_slot(state):
        def run_init(x):
            state.seq_lens.zero_()
            state.gdn_state.zero_()
            state.conv_window.zero_()
            state.mtp_hidden.zero_()
            return state.seq_lens[x.slot.long()]

        return run_init

    monkeypatch.setattr(state_ops, "init_program", zeroes_every_slot)
    with pytest.raises(ValidationError, match=rf"^{INIT.name}: .*seq_lens"):
        validate_state_operations(_validation_ops(model))


def test_fp8_index_keys_round_trip_through_snapshot_and_restore():
    """``--indexer-kv-dtype fp8``: the block keys' pages are copied as bytes (torch has no
    float8 ``index_copy_`` on CPU)."""
    config = ModelConfig.tiny_flash_next()
    state = ModelState.allocate(
        config, 3, 3 * PER_SLOT + 1, PAGE, PER_SLOT, index_key_dtype=torch.float8_e4m3fn
    )
    ops = StateOperations(state, num_rows=1, capturer=GraphCapturer("cpu"))
    state.assign_pages(0, [1, 2])
    state.assign_pages(2, [7, 8])
    state.seq_lens[0] = 2 * PAGE
    keys = torch.randn(state.index_keys[:, [1, 2]].shape).to(torch.float8_e4m3fn)
    state.index_keys[:, [1, 2]] = keys
    ops.snapshot(slot=0, row=0)
    ops.restore(slot=2, row=0)
    restored = state.index_keys[:, [7, 8]]
    assert restored.dtype == torch.float8_e4m3fn
    assert torch.equal(restored.view(torch.uint8), keys.view(torch.uint8))
