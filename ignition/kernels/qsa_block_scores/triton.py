"""Triton block scoring: one program per query and tile of ``BLOCK_B`` blocks."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ignition.kernels.paged_attention.triton import dot_precision
from ignition.kernels.qsa_block_scores import reference

BLOCK_B = 64
BLOCK_T = 16  # prefill specialisation: queries per program


@triton.jit
def _score_token(
    q_ptr, keys_ptr, page_table_ptr, row_ptr, complete_ptr, out_ptr, token, tile,
    num_heads, head_dim, blocks_per_page, max_blocks, sqrt_d,
    stride_qt, stride_qh, stride_kp, stride_kb, stride_pt, stride_ot,
    BLOCK_H: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_B: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):  # fmt: skip
    """One query against one tile of blocks, every head in one [H, d] x [d, B] matmul."""
    blocks = tile * BLOCK_B + tl.arange(0, BLOCK_B)
    num_complete = tl.load(complete_ptr + token)
    is_visible = blocks < num_complete
    scores = tl.full((BLOCK_B,), float("-inf"), dtype=tl.float32)
    if tile * BLOCK_B < num_complete:
        row = tl.load(row_ptr + token).to(tl.int64)
        offs_h = tl.arange(0, BLOCK_H)
        offs_d = tl.arange(0, BLOCK_D)
        mask_d = offs_d < head_dim
        q_offs = token * stride_qt + offs_h[:, None] * stride_qh + offs_d[None, :]
        q = tl.load(q_ptr + q_offs, mask=(offs_h < num_heads)[:, None] & mask_d[None, :], other=0)
        page = tl.load(
            page_table_ptr + row * stride_pt + blocks // blocks_per_page, mask=is_visible, other=0
        ).to(tl.int64)
        k_offs = page[:, None] * stride_kp + (blocks % blocks_per_page)[:, None] * stride_kb
        k_mask = is_visible[:, None] & mask_d[None, :]
        k = tl.load(keys_ptr + k_offs + offs_d[None, :], mask=k_mask, other=0.0).to(q.dtype)
        dots = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION)  # [H, B] fp32
        summed = tl.sum(tl.maximum(dots, 0.0), axis=0) / sqrt_d
        scores = tl.where(is_visible, summed, float("-inf"))
    tl.store(out_ptr + token * stride_ot + blocks, scores, mask=blocks < max_blocks)


@triton.jit
def _block_scores_kernel(
    q_ptr, keys_ptr, page_table_ptr, row_ptr, complete_ptr, out_ptr,
    num_heads, head_dim, blocks_per_page, max_blocks, sqrt_d,
    stride_qt, stride_qh, stride_kp, stride_kb, stride_pt, stride_ot,
    BLOCK_H: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_B: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):  # fmt: skip
    """Decode specialisation: one program per query and tile."""
    _score_token(
        q_ptr, keys_ptr, page_table_ptr, row_ptr, complete_ptr, out_ptr,
        tl.program_id(0).to(tl.int64), tl.program_id(1),
        num_heads, head_dim, blocks_per_page, max_blocks, sqrt_d,
        stride_qt, stride_qh, stride_kp, stride_kb, stride_pt, stride_ot,
        BLOCK_H, BLOCK_D, BLOCK_B, DOT_PRECISION,
    )  # fmt: skip


@triton.jit
def _block_scores_tile_kernel(
    q_ptr, keys_ptr, page_table_ptr, row_ptr, complete_ptr, out_ptr,
    num_tokens, num_heads, head_dim, blocks_per_page, max_blocks, sqrt_d,
    stride_qt, stride_qh, stride_kp, stride_kb, stride_pt, stride_ot,
    BLOCK_T: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_B: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):  # fmt: skip
    """Prefill specialisation: ``BLOCK_T`` consecutive queries per program share a tile's
    keys when they share a row."""
    first = tl.program_id(0).to(tl.int64) * BLOCK_T
    tile = tl.program_id(1)
    tokens = first + tl.arange(0, BLOCK_T)
    mask_t = tokens < num_tokens
    rows = tl.load(row_ptr + tokens, mask=mask_t, other=0)
    row = tl.load(row_ptr + first)
    complete = tl.load(complete_ptr + tokens, mask=mask_t, other=0)
    is_one_row = tl.max(tl.where(mask_t & (rows != row), 1, 0), axis=0) == 0
    blocks = tile * BLOCK_B + tl.arange(0, BLOCK_B)
    out_offs = tokens[:, None] * stride_ot + blocks[None, :]
    out_mask = mask_t[:, None] & (blocks < max_blocks)[None, :]
    if tile * BLOCK_B >= tl.max(complete, axis=0):
        hidden = tl.full((BLOCK_T, BLOCK_B), float("-inf"), dtype=tl.float32)
        tl.store(out_ptr + out_offs, hidden, mask=out_mask)
    elif is_one_row:
        offs_d = tl.arange(0, BLOCK_D)
        mask_d = offs_d < head_dim
        is_read = blocks < tl.max(complete, axis=0)
        page = tl.load(
            page_table_ptr + row.to(tl.int64) * stride_pt + blocks // blocks_per_page,
            mask=is_read,
            other=0,
        ).to(tl.int64)
        k_offs = page[:, None] * stride_kp + (blocks % blocks_per_page)[:, None] * stride_kb
        k = tl.load(keys_ptr + k_offs + offs_d[None, :], mask=is_read[:, None] & mask_d[None, :],
                    other=0.0)  # fmt: skip
        q_mask = mask_t[:, None] & mask_d[None, :]
        acc = tl.zeros((BLOCK_T, BLOCK_B), dtype=tl.float32)
        for head in range(num_heads):
            q_offs = tokens[:, None] * stride_qt + head * stride_qh + offs_d[None, :]
            q = tl.load(q_ptr + q_offs, mask=q_mask, other=0)
            dots = tl.dot(q, tl.trans(k.to(q.dtype)), input_precision=DOT_PRECISION)
            acc += tl.maximum(dots, 0.0)
        is_visible = blocks[None, :] < complete[:, None]
        tl.store(out_ptr + out_offs, tl.where(is_visible, acc / sqrt_d, float("-inf")),
                 mask=out_mask)  # fmt: skip
    else:
        for i in range(BLOCK_T):
            if first + i < num_tokens:
                _score_token(
                    q_ptr, keys_ptr, page_table_ptr, row_ptr, complete_ptr, out_ptr, first + i,
                    tile, num_heads, head_dim, blocks_per_page, max_blocks, sqrt_d,
                    stride_qt, stride_qh, stride_kp, stride_kb, stride_pt, stride_ot,
                    BLOCK_H, BLOCK_D, BLOCK_B, DOT_PRECISION,
                )  # fmt: skip


def launch_qsa_block_scores(
    q: torch.Tensor,
    block_keys: torch.Tensor,
    page_table: torch.Tensor,
    token_row: torch.Tensor,
    num_complete: torch.Tensor,
    out: torch.Tensor,
    use_tiles: bool | None = None,
) -> None:
    """Run into a preallocated ``out`` [T, max_blocks] float32. ``use_tiles`` picks the
    prefill specialisation (None: when rows average at least ``BLOCK_T`` queries)."""
    num_tokens, num_heads, head_dim = q.shape
    max_blocks = page_table.shape[1] * block_keys.shape[1]
    for name, tensor in (("q", q), ("block_keys", block_keys), ("out", out)):
        if tensor.stride(-1) != 1:
            raise ValueError(f"qsa_block_scores: {name} must be contiguous in its last dimension")
    for name, per_token in (("token_row", token_row), ("num_complete", num_complete)):
        if tuple(per_token.shape) != (num_tokens,):
            raise ValueError(f"qsa_block_scores: {name} must be [{num_tokens}]")
    if tuple(out.shape) != (num_tokens, max_blocks) or out.dtype != torch.float32:
        raise ValueError(f"qsa_block_scores: out must be [{num_tokens}, {max_blocks}] float32")
    if num_tokens == 0 or max_blocks == 0:
        return
    if use_tiles is None:
        use_tiles = num_tokens >= BLOCK_T * page_table.shape[0]
    num_tiles = triton.cdiv(max_blocks, BLOCK_B)
    common = (
        num_heads, head_dim, block_keys.shape[1], max_blocks, head_dim**0.5,
        q.stride(0), q.stride(1), block_keys.stride(0), block_keys.stride(1),
        page_table.stride(0), out.stride(0),
    )  # fmt: skip
    blocks = {
        "BLOCK_H": max(16, triton.next_power_of_2(num_heads)),
        "BLOCK_D": max(16, triton.next_power_of_2(head_dim)),
        "BLOCK_B": BLOCK_B,
        "DOT_PRECISION": dot_precision(q.dtype),
    }
    pointers = (q, block_keys, page_table, token_row, num_complete, out)
    if use_tiles:
        grid = (triton.cdiv(num_tokens, BLOCK_T), num_tiles)
        _block_scores_tile_kernel[grid](*pointers, num_tokens, *common, BLOCK_T=BLOCK_T, **blocks)
    else:
        _block_scores_kernel[(num_tokens, num_tiles)](*pointers, *common, **blocks)


def qsa_block_scores(
    q: torch.Tensor,
    block_keys: torch.Tensor,
    page_table: torch.Tensor,
    token_row: torch.Tensor,
    num_complete: torch.Tensor,
) -> torch.Tensor:
    max_blocks = page_table.shape[1] * block_keys.shape[1]
    out = torch.empty(q.shape[0], max_blocks, dtype=torch.float32, device=q.device)
    launch_qsa_block_scores(q, block_keys, page_table, token_row, num_complete, out)
    return out


qsa_block_scores.__doc__ = reference.qsa_block_scores.__doc__
