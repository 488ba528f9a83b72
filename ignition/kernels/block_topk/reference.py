"""PyTorch reference of QSA's block selection, the one definition serving and training share.

transformers' ``Qwen4ExpTextQSAIndexer`` scores each query's complete blocks as a vector of
exactly that query's length and keeps ``scores.topk(min(keep, n))``. The trained indexer often
scores blocks exactly 0 (relu of heads that are all negative), so the cut falls among ties, and
which tied blocks survive is whatever ``torch.topk`` returns for that vector: on CPU an
unstable selection (``std::nth_element``, or a partial sort when ``64 * keep <= n``) whose
choice among equal scores depends on the vector's length and every value in it. Padding the
vector (a batched row of every block, the invisible ones at -inf) changes that choice, so this
reference calls ``topk`` on the very vector transformers builds: one call per distinct visible
count. It reads the counts on the host, as references may (``compiler/host_sync``); the
capturable path is ``triton.py``.
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
    num_queries = scores.shape[0]
    counts = num_visible.long()
    chosen = torch.arange(keep, device=scores.device).expand(num_queries, keep).clone()
    if keep == 0:
        return chosen
    for count in sorted(set(counts[counts > keep].tolist())):
        rows = (counts == count).nonzero().flatten()
        chosen[rows] = scores[rows, :count].topk(keep, dim=-1).indices
    return chosen
