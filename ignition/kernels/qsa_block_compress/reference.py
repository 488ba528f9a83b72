"""PyTorch reference of QSA's block-key compression (CPU serving path).

A block's key is the mean of its ``ratio`` raw index keys, RMS-normed and roped at the block's
first position, as transformers' ``Qwen4ExpTextQSAIndexer`` builds it (with the same dtype
round trips: the mean is cast to the raw keys' dtype, the norm and the rope each compute in
fp32 and cast back). A block is written when a frame holds its last member; its earlier
members may sit in the frame, in the slot's committed ring of pending raw keys, or (MTP draft
steps) in the round's draft ring, which ``source`` says per member.
"""

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
        raw: [T, d] this frame's raw index keys.
        raw_ring, draft_ring: [slots + 1, ratio, d] pending raw keys by position % ratio
            (pass ``raw_ring`` twice when there is no draft ring).
        source: [T, ratio] int32, per member (oldest first): FROM_FRAME (``member_index`` is
            a packed token), FROM_RING or FROM_DRAFT_RING (``member_index`` is
            slot * ratio + position % ratio).
        member_index: [T, ratio] int64.
        cos, sin: [T, rotary_dim / 2] float32 rope of the block's first position (half-split
            rotation of the leading rotary_dim channels).
        norm_scale: [d] float32, the RMSNorm's scale (weight + offset).
        eps: the RMSNorm's epsilon.
        slots: [T] int32 flat block slot page * blocks_per_page + index; -1 skips the token
            (it completes no block, or it is padding, or its KV is not written).
        block_keys: [num_pages, blocks_per_page, d] the compressed-key cache (float8 allowed).
    Host sync: the reference masks the written rows on the host side of indexing (CPU
    serving); the Triton kernel does not and is graph-capturable.
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
    """Keep raw index keys as a slot's pending keys (its incomplete block's members), in place.

    Shapes:
        raw: [T, d] raw index keys of the packed tokens.
        ring: [slots + 1, ratio, d] pending raw keys by position % ratio.
        rows: [T] int64 ring row each token writes (the scratch row for tokens that keep
            nothing, so no branch depends on the data).
        ring_index: [T] int64 position % ratio.
    Valid (non-scratch) cells must be distinct; the scratch row's content is undefined.
    Host sync: none.
    """
    ring[rows, ring_index] = raw.to(ring.dtype)
