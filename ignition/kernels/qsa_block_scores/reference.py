"""PyTorch reference of QSA's block scoring: sum over heads of relu(q . k) / sqrt(d) in fp32,
as transformers computes it (exact-zero ties stay ties)."""

from __future__ import annotations

import torch

# Gathered keys per query chunk (elements): bounds the reference's memory on long rows.
MAX_CHUNK_ELEMENTS = 1 << 24


def qsa_block_scores(
    q: torch.Tensor,
    block_keys: torch.Tensor,
    page_table: torch.Tensor,
    token_row: torch.Tensor,
    num_complete: torch.Tensor,
) -> torch.Tensor:
    """Block scores [T, max_pages * blocks_per_page] fp32 of every packed query.

    Shapes:
    q [T, Hi, d] roped; block_keys [num_pages, blocks_per_page, d] paged like the KV (any
    float dtype, float8 read as fp32); page_table [R, max_pages] int32; token_row [T] int64;
    num_complete [T] int64 = (position + 1) // ratio. scores[t, b] = sum_h relu(q[t, h] .
    key_b) / sqrt(d) for b < num_complete[t], -inf beyond. No host sync.
    """
    num_tokens, num_heads, head_dim = q.shape
    pages = page_table.long().clamp(0, block_keys.shape[0] - 1)
    max_blocks = pages.shape[1] * block_keys.shape[1]
    block = torch.arange(max_blocks, device=q.device)
    out = torch.empty(num_tokens, max_blocks, dtype=torch.float32, device=q.device)
    chunk = max(1, MAX_CHUNK_ELEMENTS // (max_blocks * (head_dim + num_heads)))
    for start in range(0, num_tokens, chunk):
        part = slice(start, start + chunk)
        keys = block_keys[pages[token_row[part]]].flatten(1, 2)  # [t, max_blocks, d]
        scores = torch.einsum("thd,tbd->thb", q[part].float(), keys.float())
        scores = scores.relu().sum(dim=1) / head_dim**0.5  # [t, max_blocks]
        is_visible = block[None, :] < num_complete[part, None]
        out[part] = scores.masked_fill(~is_visible, float("-inf"))
    return out
