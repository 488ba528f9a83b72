"""The Triton top-k candidate keeps the capturable path's set: the highest scores, ties towards
the lower block, over exactly each query's visible blocks (a query with at most ``keep`` keeps
0 .. keep - 1); outputs start as garbage so that unwritten entries fail."""

from __future__ import annotations

import pytest
import torch

from ignition.kernels.block_topk.triton import block_topk

KEEP = 5


def kept_sets(chosen: torch.Tensor, counts: torch.Tensor) -> list[set[int]]:
    pairs = zip(chosen.tolist(), counts.tolist(), strict=True)
    return [{b for b in row if b < n} for row, n in pairs]


@pytest.mark.parametrize(
    "counts", [[0, 1, KEEP, KEEP + 1, 40], [1100, 7, 1024]], ids=["around-keep", "two-chunks"]
)
def test_the_kernel_keeps_what_the_sort_keeps_ties_included(counts, device):
    from ignition.kernels.block_topk.triton import launch_block_topk

    gen = torch.Generator().manual_seed(3)
    num_visible = torch.tensor(counts)
    scores = torch.rand(len(counts), 1100, generator=gen)
    scores = torch.where(scores > 0.9, (scores * 8).floor() / 8, 0.0)  # many exact ties
    scores[0, 3] = -0.0  # equal to 0.0
    expected = block_topk(scores, num_visible, KEEP)
    out = torch.full((len(counts), KEEP), -7, dtype=torch.int64, device=device)
    launch_block_topk(scores.to(device), num_visible.to(device), KEEP, out)
    assert kept_sets(out.cpu(), num_visible) == kept_sets(expected, num_visible)
    small = num_visible <= KEEP
    assert (out.cpu()[small] == torch.arange(KEEP)).all()
