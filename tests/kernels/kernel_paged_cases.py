"""Shared builders of packed paged-attention inputs for the kernel tests."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PagedCase:
    """A packed batch: rows given as (cached_len, query_len), KV already written to pages."""

    q: torch.Tensor  # [T, H, Dh]
    k_cache: torch.Tensor  # [num_pages, page_size, Hkv, Dh]
    v_cache: torch.Tensor
    page_table: torch.Tensor  # [R, max_pages] int32
    cu_query_lens: torch.Tensor  # [R + 1] int32
    context_lens: torch.Tensor  # [R] int32
    keys: list[torch.Tensor]  # per row [context, Hkv, Dh], the dense view of its pages
    values: list[torch.Tensor]


def make_paged_case(
    rows: list[tuple[int, int]],
    *,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    head_dim: int = 16,
    page_size: int = 4,
    max_pages: int = 8,
    token_capacity: int | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
    seed: int = 0,
) -> PagedCase:
    """Rows get shuffled, non-contiguous pages so that page-table indirection is exercised."""
    gen = torch.Generator().manual_seed(seed)
    num_tokens = sum(n for _, n in rows)
    capacity = token_capacity if token_capacity is not None else num_tokens
    num_pages = len(rows) * max_pages + 1
    shape = (num_pages, page_size, num_kv_heads, head_dim)
    k_cache = torch.randn(shape, generator=gen).to(dtype)
    v_cache = torch.randn(shape, generator=gen).to(dtype)
    permutation = torch.randperm(num_pages, generator=gen)
    page_table = permutation[: len(rows) * max_pages].reshape(len(rows), max_pages)
    q = torch.randn(capacity, num_heads, head_dim, generator=gen).to(dtype)
    keys, values = [], []
    for r, (cached, query) in enumerate(rows):
        context = cached + query
        assert context <= max_pages * page_size
        slots = torch.arange(context)
        pages = page_table[r, slots // page_size]
        keys.append(k_cache[pages, slots % page_size])
        values.append(v_cache[pages, slots % page_size])
    query_lens = torch.tensor([0] + [n for _, n in rows])
    return PagedCase(
        q=q.to(device),
        k_cache=k_cache.to(device),
        v_cache=v_cache.to(device),
        page_table=page_table.to(torch.int32).to(device),
        cu_query_lens=query_lens.cumsum(0).to(torch.int32).to(device),
        context_lens=torch.tensor([c + n for c, n in rows], dtype=torch.int32, device=device),
        keys=keys,
        values=values,
    )
