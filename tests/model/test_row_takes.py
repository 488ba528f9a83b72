"""The CPU fast gathers copy exactly what advanced indexing copies: the same bits, so the
forward's outputs are unchanged by them (no arithmetic moves)."""

from __future__ import annotations

import torch

from ignition.kernels.paged_attention.reference import _gather_keys
from ignition.model.packing import take_positions, take_rows


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
