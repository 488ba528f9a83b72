"""PyTorch reference of QSA's block scoring over the paged block keys (CPU serving path).

A query scores each complete block of its row visible to it as the sum over the indexer's
query heads of relu(q . k) / sqrt(d), exactly as transformers' ``Qwen4ExpTextQSAIndexer``
computes it (fp32 products of the stored operands), so that the ties the trained indexer makes
(whole blocks scored exactly 0) stay ties and ``block_topk`` chooses among them as
transformers does. Prompt rows and decode / verification rows are the same case: each token
carries its row and its count of visible complete blocks.

Every query of a row reads the same keys, so a run of consecutive queries of one row (a
prompt chunk) reads its row's keys once, upcast once, and scores them in one product; the
queries of short runs (decode rows) gather their own rows' keys. Both compute each score as
the same fp32 dot product over ``d`` in a product of ``max_blocks`` columns, so they give
the same bits (not the visible columns alone: a BLAS product's last bits in a column depend
on how many columns it has). Finding the runs reads the rows on the host, as references may
(``compiler/host_sync``).
"""

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
    """Block scores [T, max_pages * blocks_per_page] float32 of every packed query.

    Shapes:
        q: [T, Hi, d] roped index queries.
        block_keys: [num_pages, blocks_per_page, d] compressed block keys, paged like the KV
            (page p holds the keys of the blocks starting in KV page p); any float dtype,
            float8 included (read as fp32).
        page_table: [R, max_pages] int32; entries past a row's blocks may be anything.
        token_row: [T] int64 row of each query, in [0, R).
        num_complete: [T] int64 complete blocks visible to the query: (position + 1) // ratio.
    Returns:
        scores[t, b] = sum_h relu(q[t, h] . key_b) / sqrt(d) for b < num_complete[t], -inf
        for the blocks past it (and so for every block of a query with none).
    Host sync: one read of ``token_row``; the Triton kernel is graph-capturable.
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
