"""Triton block scoring (same signature as ``reference.py``): one program per query and tile
of ``BLOCK_B`` blocks, all index heads at once.

Every head's dot product with the tile's keys is one [heads, d] x [d, BLOCK_B] matmul; the
relu and the sum over heads stay in registers, so only the [T, max_blocks] scores reach
memory. Tiles past a query's visible blocks write -inf without reading a key, so a decode row
reads only its own context's block keys (the kernel's HBM traffic), and the grid depends only
on shapes (graph-capturable).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ignition.kernels.paged_attention.triton import dot_precision
from ignition.kernels.qsa_block_scores import reference

BLOCK_B = 64


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
    token = tl.program_id(0).to(tl.int64)
    tile = tl.program_id(1)
    blocks = tile * BLOCK_B + tl.arange(0, BLOCK_B)
    in_range = blocks < max_blocks
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
        k = tl.load(keys_ptr + k_offs + offs_d[None, :], mask=k_mask, other=0).to(tl.float32)
        dots = tl.dot(q.to(tl.float32), tl.trans(k), input_precision=DOT_PRECISION)  # [H, B]
        summed = tl.sum(tl.maximum(dots, 0.0), axis=0) / sqrt_d
        scores = tl.where(is_visible, summed, float("-inf"))
    tl.store(out_ptr + token * stride_ot + blocks, scores, mask=in_range)


def launch_qsa_block_scores(
    q: torch.Tensor,
    block_keys: torch.Tensor,
    page_table: torch.Tensor,
    token_row: torch.Tensor,
    num_complete: torch.Tensor,
    out: torch.Tensor,
) -> None:
    """Run the kernel into a preallocated ``out`` [T, max_blocks] float32."""
    num_tokens, num_heads, head_dim = q.shape
    max_blocks = page_table.shape[1] * block_keys.shape[1]
    for name, tensor in (("q", q), ("block_keys", block_keys), ("out", out)):
        if tensor.stride(-1) != 1:
            raise ValueError(f"qsa_block_scores: {name} must be contiguous in its last dimension")
    if tuple(out.shape) != (num_tokens, max_blocks) or out.dtype != torch.float32:
        raise ValueError(f"qsa_block_scores: out must be [{num_tokens}, {max_blocks}] float32")
    if num_tokens == 0 or max_blocks == 0:
        return
    grid = (num_tokens, triton.cdiv(max_blocks, BLOCK_B))
    _block_scores_kernel[grid](
        q, block_keys, page_table, token_row, num_complete, out,
        num_heads, head_dim, block_keys.shape[1], max_blocks, head_dim**0.5,
        q.stride(0), q.stride(1), block_keys.stride(0), block_keys.stride(1),
        page_table.stride(0), out.stride(0),
        BLOCK_H=max(16, triton.next_power_of_2(num_heads)),
        BLOCK_D=max(16, triton.next_power_of_2(head_dim)),
        BLOCK_B=BLOCK_B,
        DOT_PRECISION=dot_precision(q.dtype),
    )  # fmt: skip


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
