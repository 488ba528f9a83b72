"""The capturable block selection for CUDA programs (same signature as ``reference.py``).

There is no Triton kernel here: a stable descending sort is already capturable (no host read,
static shapes) and fast enough beside the scoring it follows. It keeps the highest scores and
breaks ties towards the lower block index. That is our reading of CUDA's ``torch.topk`` (its
single-block path gathers the values above the k-th, then those equal to it in index order),
so likely what transformers selects on a GPU; it is not checked on a GPU yet. On CPU
transformers' choice among ties is the unstable one ``reference.py`` reproduces; the two paths
agree whenever the cut is not a tie.
"""

from __future__ import annotations

import torch


def block_topk(scores: torch.Tensor, num_visible: torch.Tensor, keep: int) -> torch.Tensor:
    """As ``reference.block_topk``: [N, keep] kept block indices; entries at or past a query's
    count mean "none"."""
    block = torch.arange(scores.shape[1], device=scores.device)
    is_visible = block[None, :] < num_visible.long()[:, None]
    masked = scores.float().masked_fill(~is_visible, float("-inf"))
    return torch.sort(masked, dim=-1, descending=True, stable=True).indices[:, :keep]
