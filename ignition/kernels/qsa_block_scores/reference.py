"""PyTorch reference of QSA's block scoring: sum over heads of relu(q . k) / sqrt(d) in fp32,
as transformers computes it (exact-zero ties stay ties). A run of one row's queries (a prompt
chunk) reads its row's keys once and scores them in one product of ``max_blocks`` columns, the
same bits as per-query scoring (docs/cpu_profile.md)."""

from __future__ import annotations

import torch

# Gathered keys per query chunk (elements): bounds the reference's memory on long rows.
MAX_CHUNK_ELEMENTS = 1 << 24
# Queries of one row in a row that score against their row's keys read once.
MIN_SHARED_RUN = 4


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
    key_b) / sqrt(d) for b < num_complete[t], -inf beyond. Host sync: one read of
    ``token_row`` (the Triton kernel is graph-capturable).
    """
    num_tokens, num_heads, head_dim = q.shape
    pages = page_table.long().clamp(0, block_keys.shape[0] - 1)
    max_blocks = pages.shape[1] * block_keys.shape[1]
    out = torch.empty(num_tokens, max_blocks, dtype=torch.float32, device=q.device)
    chunk = max(1, MAX_CHUNK_ELEMENTS // (max_blocks * (head_dim + num_heads)))
    gathered: list[torch.Tensor] = []
    for start, stop, row in row_runs(token_row):
        if stop - start < MIN_SHARED_RUN:
            gathered.append(torch.arange(start, stop, device=q.device))
            continue
        keys = block_keys[pages[row]].flatten(0, 1).float()  # [max_blocks, d]
        for part in range(start, stop, chunk):
            end = min(part + chunk, stop)
            scores = torch.einsum("thd,bd->thb", q[part:end].float(), keys)
            out[part:end] = scores.relu().sum(dim=1) / head_dim**0.5
    if gathered:
        tokens = torch.cat(gathered)
        for part in tokens.split(chunk):
            keys = block_keys[pages[token_row[part]]].flatten(1, 2)  # [t, max_blocks, d]
            scores = torch.einsum("thd,tbd->thb", q[part].float(), keys.float())
            out[part] = scores.relu().sum(dim=1) / head_dim**0.5
    block = torch.arange(max_blocks, device=q.device)
    return out.masked_fill_(block[None, :] >= num_complete[:, None], float("-inf"))


def row_runs(token_row: torch.Tensor) -> list[tuple[int, int, int]]:
    """(start, stop, row) of each run of consecutive equal rows in ``token_row`` [T]."""
    num_tokens = token_row.shape[0]
    if num_tokens == 0:
        return []
    starts = (token_row[1:] != token_row[:-1]).nonzero().flatten() + 1
    bounds = [0, *starts.tolist(), num_tokens]
    rows = token_row[bounds[:-1]].tolist()
    return [(bounds[i], bounds[i + 1], rows[i]) for i in range(len(rows))]
