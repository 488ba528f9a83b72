"""PyTorch reference of QSA's sparse attention over the paged KV (CPU serving path).

Each packed query attends to its own list of selected positions (the indexer's kept blocks and
the incomplete tail), read through its row's page table. Prompt, decode and verification rows
are the same case: the selection already holds each query's causal visibility.
"""

from __future__ import annotations

import torch

# Gathered keys and values per query chunk (elements): bounds the memory on long rows.
MAX_CHUNK_ELEMENTS = 1 << 24


def qsa_sparse_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    page_table: torch.Tensor,
    token_row: torch.Tensor,
    selected: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Softmax attention of each query over its selected positions.

    Shapes:
        q: [T, H, Dh] packed queries.
        k_cache, v_cache: [num_pages, page_size, Hkv, Dh]; head h reads kv head h // (H / Hkv).
        page_table: [R, max_pages] int32.
        token_row: [T] int64 row of each query, in [0, R).
        selected: [T, S] int64 positions in the query's row, -1 = none (anywhere in the list);
            the keys at them are already written (``write_paged_kv``).
        scale: softmax scale.
    Returns:
        [T, H, Dh] in q's dtype; zeros for a query that selects nothing (padding).
    Host sync: none.
    """
    num_tokens, num_heads, head_dim = q.shape
    page_size, num_kv = k_cache.shape[1], k_cache.shape[2]
    width = selected.shape[1]
    flat_k = k_cache.reshape(-1, num_kv, head_dim)
    flat_v = v_cache.reshape(-1, num_kv, head_dim)
    grouped = q.view(num_tokens, num_kv, num_heads // num_kv, head_dim)
    out = torch.zeros_like(q)
    chunk = max(1, MAX_CHUNK_ELEMENTS // (2 * max(width, 1) * num_kv * head_dim))
    for start in range(0, num_tokens, chunk):
        part = slice(start, start + chunk)
        pos = selected[part]
        is_used = pos >= 0
        safe = pos.clamp(min=0)
        page = page_table[token_row[part, None], safe // page_size].long().clamp(min=0)
        slot = page * page_size + safe % page_size  # [t, S]
        # index_select of the flattened slots: the same gather as flat_k[slot], without
        # advanced indexing's per-element index arithmetic (a third faster on CPU)
        rows = slot.reshape(-1)
        keys = flat_k.index_select(0, rows).view(*slot.shape, num_kv, head_dim).float()
        values = flat_v.index_select(0, rows).view(*slot.shape, num_kv, head_dim).float()
        logits = torch.einsum("tkgd,tskd->tkgs", grouped[part].float(), keys) * scale
        logits = logits.masked_fill(~is_used[:, None, None, :], float("-inf"))
        weights = torch.softmax(logits, dim=-1).nan_to_num(0.0)
        attended = torch.einsum("tkgs,tskd->tkgd", weights, values)
        out[part] = attended.reshape(-1, num_heads, head_dim).to(q.dtype)
    return out
