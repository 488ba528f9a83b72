"""QSA's block selection keeps what transformers keeps: each query's ``topk`` over exactly its
own visible blocks, which on CPU decides among tied (zero) scores in an order that depends on
the vector's length, so the reference never pads. The capturable path breaks ties towards the
lower block index and agrees with the reference whenever the cut is not a tie."""

from __future__ import annotations

import torch

from ignition.kernels.block_topk.reference import block_topk
from ignition.kernels.block_topk.triton import block_topk as capturable_block_topk

KEEP = 3


def tied_scores(num_queries: int, max_blocks: int, seed: int = 0) -> torch.Tensor:
    """Relu-like scores: most blocks exactly 0, a few positive, so cuts fall among ties."""
    gen = torch.Generator().manual_seed(seed)
    scores = torch.rand(num_queries, max_blocks, generator=gen)
    return torch.where(scores > 0.95, scores, torch.zeros(()))


def test_each_query_keeps_the_topk_of_exactly_its_own_visible_blocks():
    scores = tied_scores(40, 70)
    counts = torch.randint(0, 71, (40,), generator=torch.Generator().manual_seed(1))
    chosen = block_topk(scores, counts, KEEP)
    for i, n in enumerate(counts.tolist()):
        if n > KEEP:  # transformers' call: a vector of exactly n scores
            expected = scores[i, :n].topk(KEEP, dim=0).indices
            assert chosen[i].tolist() == expected.tolist(), (i, n)


def test_a_query_with_at_most_keep_blocks_keeps_them_all():
    counts = torch.tensor([0, 1, KEEP])
    chosen = block_topk(tied_scores(3, 8), counts, KEEP)
    for row, n in zip(chosen.tolist(), counts.tolist(), strict=True):
        assert [b for b in row if b < n] == list(range(n))


def test_the_capturable_path_breaks_ties_towards_the_lower_block():
    scores = torch.tensor([[0.0, 0.5, 0.0, 0.0, 0.0, 0.7, 0.0]])
    chosen = capturable_block_topk(scores, torch.tensor([7]), KEEP)
    assert sorted(chosen[0].tolist()) == [0, 1, 5]


def test_the_capturable_path_keeps_the_reference_set_when_the_cut_is_not_tied():
    gen = torch.Generator().manual_seed(2)
    scores = torch.rand(30, 50, generator=gen)  # distinct almost surely
    counts = torch.randint(0, 51, (30,), generator=gen)
    ours = capturable_block_topk(scores, counts, KEEP)
    reference = block_topk(scores, counts, KEEP)
    for i, n in enumerate(counts.tolist()):
        kept = {b for b in ours[i].tolist() if b < n}
        assert kept == {b for b in reference[i].tolist() if b < n}, i
