"""The CPU fast gathers copy exactly what advanced indexing copies: the same bits, so the
forward's outputs are unchanged by them (no arithmetic moves)."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

import ignition.model.model as model_module
from ignition.kernels.paged_attention.reference import _gather_keys
from ignition.model.config import ModelConfig
from ignition.model.packing import kept_candidates, take_positions, take_rows
from ignition.model.state import ModelState
from ignition.model.weights import random_model
from tests.model.conftest import new_state
from tests.model.helpers import decode_rows, prefill


def _bits(x: torch.Tensor) -> torch.Tensor:
    return x.view(torch.int32)


def _awkward(*shape: int) -> torch.Tensor:
    """Random fp32 with the values a copy could mangle: -0.0, NaN and infinities."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    flat = x.view(-1)
    flat[:4] = torch.tensor([-0.0, float("nan"), float("inf"), -float("inf")])
    return x


def test_take_rows_copies_the_rows_advanced_indexing_copies():
    state = _awkward(5, 8, 64, 64)  # slots + scratch row of one GDN layer's state
    for rows in (torch.tensor([4]), torch.tensor([0, 2, 4, 4]), torch.tensor([], dtype=torch.long)):
        assert torch.equal(_bits(take_rows(state, rows)), _bits(state[rows]))


def test_take_positions_copies_each_rows_position_as_two_index_indexing_does():
    states = _awkward(4, 3, 8, 16)  # [R, W, ...] a state after every decode position
    rows, positions = torch.arange(4), torch.tensor([2, 0, 1, 0])
    taken = take_positions(states, rows, positions)
    assert torch.equal(_bits(taken), _bits(states[rows, positions]))


def test_the_reference_attention_gathers_the_pages_advanced_indexing_gathers():
    cache = _awkward(9, 4, 2, 8)  # [pages, page size, kv heads, head dim]
    page_table = torch.tensor([[3, 1, -1], [0, 8, 2], [5, 5, 7]], dtype=torch.int32)
    rows = torch.tensor([2, 0])
    pages = page_table[rows, :3].long().clamp(0, cache.shape[0] - 1)
    expected = cache[pages].flatten(1, 2)
    assert torch.equal(_bits(_gather_keys(cache, page_table, rows, 3)), _bits(expected))


def test_a_width_one_commit_keeps_each_rows_only_candidate_as_indexing_does():
    candidates = _awkward(4, 1, 8, 16)  # [R, W = 1, ...]: a plain decode program's states
    rows, positions = torch.arange(4), torch.zeros(4, dtype=torch.long)
    kept = kept_candidates(candidates, rows, positions)
    assert torch.equal(_bits(kept), _bits(candidates[rows, positions]))


def test_a_wider_commit_keeps_each_rows_candidate_at_its_position():
    candidates = _awkward(4, 3, 8, 16)
    rows, positions = torch.arange(4), torch.tensor([2, 0, 1, 0])
    kept = kept_candidates(candidates, rows, positions)
    assert torch.equal(_bits(kept), _bits(candidates[rows, positions]))


def _state_bytes(state: ModelState) -> dict[str, torch.Tensor]:
    tensors = {f.name: getattr(state, f.name) for f in dataclasses.fields(state)}
    return {
        name: t.contiguous().view(torch.uint8).clone()
        for name, t in tensors.items()
        if isinstance(t, torch.Tensor) and t.numel()
    }


@pytest.mark.parametrize("family", ["tiny", "tiny_flash_next"])
def test_a_decode_step_commits_the_same_bits_as_the_indexing_commit(family, monkeypatch):
    """Logits and every state tensor (scratch rows included) after a width-1 decode step of
    three rows beside an inactive one are byte-for-byte those of the gathering commit."""
    config = getattr(ModelConfig, family)()
    model = random_model(config, seed=0)
    state = new_state(config)
    for slot, prompt in enumerate([[5, 9, 14, 3, 8], [7, 2, 11], [4, 4, 6, 1, 12, 10, 2]]):
        prefill(model, state, slot, prompt)
    before = copy.deepcopy(state)
    rows, slots = [[3], [17], [29]], [2, 0, 1]
    fast = decode_rows(model, state, rows, slots, width=1, batch_capacity=4)
    monkeypatch.setattr(model_module, "kept_candidates", lambda c, r, p: c[r, p])
    gathered = decode_rows(model, before, rows, slots, width=1, batch_capacity=4)
    assert torch.equal(_bits(fast.target.logits), _bits(gathered.target.logits))
    ours, reference = _state_bytes(state), _state_bytes(before)
    assert ours.keys() == reference.keys()
    for name, expected in reference.items():
        assert torch.equal(ours[name], expected), name
