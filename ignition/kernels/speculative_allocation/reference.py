"""PyTorch reference of device confidence allocation: greedy frontier admission as one global
order of candidates, computed without a loop (docs/kernels.md)."""

from __future__ import annotations

import torch


def allocate_speculative_prefixes(
    draft_probs: torch.Tensor,
    lane_ceilings: torch.Tensor,
    packed_capacity: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Choose each lane's verified query length within ``packed_capacity`` target rows.

    Shapes:
    draft_probs [R, D] fp32 in [0, 1]; lane_ceilings [R] int32 = min(D + 1, W, request
    limit), 0 inactive; packed_capacity P >= R. Returns (query_lens [R] int32, 1 + admitted
    drafts, sum <= P; confidence [2, R, D] fp32: per-position and joint prefix
    probabilities). Ties: shorter prefix, then lower lane. No host sync.
    """
    num_lanes, depth = draft_probs.shape
    if packed_capacity < num_lanes:
        raise ValueError(
            f"packed_capacity {packed_capacity} is below the {num_lanes} lanes: every lane "
            "needs room for its pending token"
        )
    device = draft_probs.device
    ceilings = lane_ceilings.to(device=device, dtype=torch.int64)
    is_active = ceilings > 0
    probs = torch.where(is_active[:, None], draft_probs.float(), 0.0)
    joint = probs.cumprod(dim=1)  # [R, D]
    confidence = torch.stack([probs, joint])

    # Candidate (r, j): grow lane r from length j to j + 1, worth joint[r, j - 1], j >= 1.
    prefix_len = torch.arange(1, depth + 1, device=device)  # [D]
    eligible = prefix_len[None, :] < ceilings[:, None]  # [R, D]
    value = torch.where(eligible, joint, -1.0)  # probabilities are >= 0
    # Flatten prefix-major so a stable descending sort breaks ties by prefix, then lane.
    order = torch.sort(value.t().reshape(-1), descending=True, stable=True).indices
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel(), device=device)
    budget = packed_capacity - is_active.sum()
    admitted = (rank.reshape(depth, num_lanes).t() < budget) & eligible  # [R, D]
    query_lens = is_active.to(torch.int32) + admitted.sum(dim=1, dtype=torch.int32)
    return query_lens, confidence
