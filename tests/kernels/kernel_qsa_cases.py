"""Shared builders of QSA kernel inputs: packed rows over shuffled pages, each token with its
row, position, visible complete blocks and a selection like the indexer's (best blocks, tail).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class QsaCase:
    """Rows given as (cached_len, query_len); blocks of ``ratio`` tokens, ``keep`` kept."""

    q: torch.Tensor  # [T, H, Dh] attention queries
    index_q: torch.Tensor  # [T, Hi, d] index queries
    k_cache: torch.Tensor  # [num_pages, page_size, Hkv, Dh]
    v_cache: torch.Tensor
    block_keys: torch.Tensor  # [num_pages, page_size / ratio, d]
    page_table: torch.Tensor  # [R, max_pages] int32
    token_row: torch.Tensor  # [T] int64
    positions: torch.Tensor  # [T] int64
    num_complete: torch.Tensor  # [T] int64
    selected: torch.Tensor  # [T, keep * ratio + ratio - 1] int64, -1 = none


def make_qsa_case(
    rows: list[tuple[int, int]],
    *,
    ratio: int = 4,
    keep: int = 3,
    page_size: int = 8,
    max_pages: int = 8,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    head_dim: int = 16,
    index_heads: int = 3,
    index_dim: int = 16,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
    seed: int = 0,
) -> QsaCase:
    gen = torch.Generator().manual_seed(seed)
    num_pages = len(rows) * max_pages + 1
    permutation = torch.randperm(num_pages, generator=gen)
    page_table = permutation[: len(rows) * max_pages].reshape(len(rows), max_pages)
    kv_shape = (num_pages, page_size, num_kv_heads, head_dim)
    token_row = torch.cat([torch.full((n,), r) for r, (_, n) in enumerate(rows)])
    positions = torch.cat([torch.arange(c, c + n) for c, n in rows])
    for cached, query in rows:
        assert cached + query <= page_size * max_pages
    num_tokens = token_row.shape[0]
    num_complete = (positions + 1) // ratio
    selected = torch.full((num_tokens, keep * ratio + ratio - 1), -1, dtype=torch.long)
    for t in range(num_tokens):
        blocks = torch.randperm(int(num_complete[t]), generator=gen)[:keep]
        chosen = (blocks[:, None] * ratio + torch.arange(ratio)).flatten()
        tail = torch.arange(int(num_complete[t]) * ratio, int(positions[t]) + 1)
        picked = torch.cat([chosen, tail])
        slots = torch.randperm(selected.shape[1], generator=gen)[: picked.numel()]
        selected[t, slots] = picked  # -1 anywhere in the list
    return QsaCase(
        q=torch.randn(num_tokens, num_heads, head_dim, generator=gen).to(dtype).to(device),
        index_q=torch.randn(num_tokens, index_heads, index_dim, generator=gen).to(dtype).to(device),
        k_cache=torch.randn(kv_shape, generator=gen).to(dtype).to(device),
        v_cache=torch.randn(kv_shape, generator=gen).to(dtype).to(device),
        block_keys=torch.randn(num_pages, page_size // ratio, index_dim, generator=gen)
        .to(dtype)
        .to(device),
        page_table=page_table.to(torch.int32).to(device),
        token_row=token_row.to(device),
        positions=positions.to(device),
        num_complete=num_complete.to(device),
        selected=selected.to(device),
    )
