"""PyTorch reference of packed paged attention and the paged KV write (CPU serving path)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

# Rows at most this long are batched together; longer rows (prompt chunks) run alone.
MAX_BATCHED_QUERY_LEN = 16


def _gather_keys(
    cache: torch.Tensor, page_table: torch.Tensor, rows: torch.Tensor, num_pages: int
) -> torch.Tensor:
    """[len(rows), num_pages * page_size, Hkv, Dh] keys (or values) of ``rows`` in order."""
    # Entries past a row's context may be stale or -1; clamp them to a real page, masked later.
    pages = page_table[rows, :num_pages].long().clamp(0, cache.shape[0] - 1)  # [rows, pages]
    # cache[pages].flatten(1, 2) via index_select (faster on CPU for page-sized rows)
    gathered = cache.index_select(0, pages.reshape(-1))  # [rows * pages, page_size, Hkv, Dh]
    return gathered.view(pages.shape[0], pages.shape[1] * cache.shape[1], *cache.shape[2:])


def _attend_rows(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    page_table: torch.Tensor,
    starts: list[int],
    query_lens: list[int],
    context_lens: list[int],
    rows: list[int],
    scale: float,
) -> list[torch.Tensor]:
    """Attention for ``rows`` padded to one batch; returns one [qlen, H, Dh] fp32 per row."""
    page_size = k_cache.shape[1]
    max_query_len = max(query_lens[r] for r in rows)
    max_context_len = max(context_lens[r] for r in rows)
    num_pages = -(-max_context_len // page_size)
    row_index = torch.tensor(rows, device=q.device)
    keys = _gather_keys(k_cache, page_table, row_index, num_pages).float()  # [B, L, Hkv, Dh]
    values = _gather_keys(v_cache, page_table, row_index, num_pages).float()
    qlen = torch.tensor([query_lens[r] for r in rows], device=q.device)
    offsets = torch.arange(max_query_len, device=q.device)
    start = torch.tensor([starts[r] for r in rows], device=q.device)
    # Padded query slots of short rows re-read the row's first token; their output is dropped.
    token_index = start[:, None] + torch.where(offsets < qlen[:, None], offsets, 0)
    queries = q[token_index].float()  # [B, Q, H, Dh]
    ctx = torch.tensor([context_lens[r] for r in rows], device=q.device)
    query_pos = ctx[:, None] - qlen[:, None] + offsets
    key_pos = torch.arange(keys.shape[1], device=q.device)
    # [B, 1, Q, L]: causal within the row and never past its context (stale page slots).
    mask = (key_pos[None, None, :] <= query_pos[:, :, None])[:, None]
    out = F.scaled_dot_product_attention(
        queries.transpose(1, 2),
        keys.transpose(1, 2),
        values.transpose(1, 2),
        attn_mask=mask,
        scale=scale,
        enable_gqa=q.shape[1] != keys.shape[2],
    ).transpose(1, 2)  # [B, Q, H, Dh]
    return [out[slot, : query_lens[r]] for slot, r in enumerate(rows)]


def packed_paged_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    page_table: torch.Tensor,
    cu_query_lens: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Varlen causal attention over paged KV for prompt and decode rows in one call.

    Shapes:
    q [T, H, Dh] packed; k_cache, v_cache [num_pages, page_size, Hkv, Dh], head h reads kv
    head h // (H // Hkv); page_table [R, max_pages] int32; cu_query_lens [R + 1] int32 prefix
    sums (a row may have length 0); context_lens [R] int32 = cached + query length, new keys
    already written (``write_paged_kv``). Returns o [T, H, Dh]: query i of row r at position
    context_lens[r] - query_len[r] + i attends to keys [0, that position].
    Padding: tokens past cu_query_lens[R] are zeros; length-0 rows read nothing; table
    entries past a context may hold anything. The reference reads lengths on the host; the
    Triton kernel does not.
    """
    out = torch.zeros_like(q)
    cu = cu_query_lens.tolist()
    context = context_lens.tolist()
    starts = cu[:-1]
    query_lens = [cu[r + 1] - cu[r] for r in range(len(starts))]
    active = [r for r, n in enumerate(query_lens) if n > 0]
    short_rows = [r for r in active if query_lens[r] <= MAX_BATCHED_QUERY_LEN]
    groups = [[r] for r in active if query_lens[r] > MAX_BATCHED_QUERY_LEN]
    if short_rows:
        groups.append(short_rows)
    for rows in groups:
        results = _attend_rows(
            q, k_cache, v_cache, page_table, starts, query_lens, context, rows, scale
        )
        for r, result in zip(rows, results, strict=True):
            out[starts[r] : starts[r] + query_lens[r]] = result.to(q.dtype)
    return out


def write_paged_kv(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Scatter new keys and values into their cache slots, in place.

    Shapes:
    k, v [T, Hkv, Dh]; caches [num_pages, page_size, Hkv, Dh]; slot_mapping [T] int32 =
    page * page_size + offset, -1 skips the token. Valid slots must be distinct.
    """
    keep = slot_mapping >= 0
    slots = slot_mapping[keep].long()
    k_cache.view(-1, *k_cache.shape[2:])[slots] = k[keep].to(k_cache.dtype)
    v_cache.view(-1, *v_cache.shape[2:])[slots] = v[keep].to(v_cache.dtype)
