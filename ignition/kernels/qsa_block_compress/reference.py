"""PyTorch reference of QSA's block-key compression: member mean, RMS norm, rope at the
block's first position, with transformers' dtype round trips."""

from __future__ import annotations

import torch

FROM_FRAME, FROM_RING, FROM_DRAFT_RING = 0, 1, 2


def compress_block_keys(
    raw: torch.Tensor,
    raw_ring: torch.Tensor,
    draft_ring: torch.Tensor,
    source: torch.Tensor,
    member_index: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    norm_scale: torch.Tensor,
    eps: float,
    slots: torch.Tensor,
    block_keys: torch.Tensor,
) -> None:
    """Write the block key of every token that completes a block, in place.

    Shapes:
    raw [T, d]; raw_ring, draft_ring [slots + 1, ratio, d] by position % ratio (``raw_ring``
    twice without a draft ring); source [T, ratio] int32 per member, oldest first:
    FROM_FRAME (``member_index`` a packed token) or FROM_RING / FROM_DRAFT_RING
    (slot * ratio + position % ratio); member_index [T, ratio] int64; cos, sin
    [T, rotary_dim / 2] fp32 rope of the block's first position; norm_scale [d] fp32
    (weight + offset); slots [T] int32 page * blocks_per_page + index, -1 skips; block_keys
    [num_pages, blocks_per_page, d] (float8 allowed). The reference syncs; Triton does not.
    """
    num_tokens, head_dim = raw.shape
    ratio = source.shape[1]
    frame = raw[member_index.clamp(0, max(num_tokens - 1, 0))]
    ring_index = member_index.clamp(0, raw_ring.shape[0] * ratio - 1)
    ringed = raw_ring.reshape(-1, head_dim)[ring_index]
    drafted = draft_ring.reshape(-1, head_dim)[ring_index]
    from_ring = torch.where((source == FROM_DRAFT_RING)[..., None], drafted, ringed)
    members = torch.where((source == FROM_FRAME)[..., None], frame, from_ring)  # [T, ratio, d]
    pooled = members.float().mean(dim=1).to(raw.dtype)
    x32 = pooled.float()
    normed = (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * norm_scale).to(raw.dtype)
    half = cos.shape[1]
    rot = normed[:, : 2 * half].float()
    first, second = rot[:, :half], rot[:, half:]
    rotated = torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)
    keys = torch.cat([rotated.to(raw.dtype), normed[:, 2 * half :]], dim=-1)
    is_written = slots >= 0
    flat = block_keys.view(-1, head_dim)
    flat[slots[is_written].long()] = keys[is_written].to(block_keys.dtype)


def write_pending_keys(
    raw: torch.Tensor, ring: torch.Tensor, rows: torch.Tensor, ring_index: torch.Tensor
) -> None:
    """Keep raw index keys as a slot's pending keys, in place: raw [T, d] into ring
    [slots + 1, ratio, d] at rows [T] int64 (scratch row for tokens keeping nothing) and
    ring_index [T] int64 = position % ratio. Valid cells must be distinct. No host sync.
    """
    ring[rows, ring_index] = raw.to(ring.dtype)
