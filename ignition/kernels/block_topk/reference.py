"""PyTorch reference of QSA's block selection, the one definition serving and training share.

transformers' ``Qwen4ExpTextQSAIndexer`` scores each query's complete blocks as a vector of
exactly that query's length and keeps ``scores.topk(min(keep, n))``. The trained indexer often
scores blocks exactly 0 (relu of heads that are all negative), so the cut falls among ties, and
which tied blocks survive is whatever ``torch.topk`` returns for that vector: on CPU an
unstable selection (``std::nth_element``, or a partial sort when ``64 * keep <= n``) whose
choice among equal scores depends on the vector's length and every value in it. Padding the
vector (a batched row of every block, the invisible ones at -inf) changes that choice, so for
every query whose cut is tied this reference calls ``topk`` on the very vector transformers
builds: one call per distinct visible count among those queries. A query whose keep-th and
next scores differ has one top set whatever the order, which one padded ``topk`` finds for all
queries at once. The tied queries' counts are read on the host, as references may
(``compiler/host_sync``); the capturable path is ``triton.py``.
"""

from __future__ import annotations

import torch


def block_topk(scores: torch.Tensor, num_visible: torch.Tensor, keep: int) -> torch.Tensor:
    """Indices [N, keep] (int64) of each query's kept blocks, in ``topk`` order.

    scores [N, max_blocks] float (entries at or past a query's count are ignored);
    num_visible [N] the query's complete blocks; keep >= 0, at most max_blocks. A query with
    at most ``keep`` blocks keeps them all: its row is 0, 1, ..., keep - 1, and the entries at
    or past its count mean "none" (callers test ``index < num_visible``), as for padding rows.
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
