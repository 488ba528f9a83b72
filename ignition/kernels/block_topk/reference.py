"""PyTorch reference of QSA's block selection, shared by serving and training; tied cuts
reproduce transformers' ``torch.topk`` exactly (host reads; docs/kernels.md)."""

from __future__ import annotations

import torch


def block_topk(scores: torch.Tensor, num_visible: torch.Tensor, keep: int) -> torch.Tensor:
    """Indices [N, keep] int64 of each query's kept blocks, in ``topk`` order.

    scores [N, max_blocks] (entries past a query's count ignored); num_visible [N]; 0 <= keep
    <= max_blocks. A query with at most ``keep`` blocks gets 0 .. keep - 1, entries at or past
    its count meaning "none" (callers test ``index < num_visible``).
    """
    num_queries, max_blocks = scores.shape
    counts = num_visible.long()
    chosen = torch.arange(keep, device=scores.device).expand(num_queries, keep).clone()
    if keep == 0:
        return chosen
    is_selecting = counts > keep  # then max_blocks >= count > keep: a next score exists
    if keep < max_blocks:
        block = torch.arange(max_blocks, device=scores.device)
        masked = scores.masked_fill(block[None, :] >= counts[:, None], float("-inf"))
        best = masked.topk(keep + 1, dim=-1)
        chosen = torch.where(is_selecting[:, None], best.indices[:, :keep], chosen)
        is_tied = is_selecting & (best.values[:, keep - 1] == best.values[:, keep])
        for count in sorted(set(counts[is_tied].tolist())):
            rows = (is_tied & (counts == count)).nonzero().flatten()
            chosen[rows] = scores[rows, :count].topk(keep, dim=-1).indices
    return chosen
