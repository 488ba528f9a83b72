"""The capturable block selection: a stable descending sort, ties towards the lower block
(docs/kernels.md)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


def block_topk(scores: torch.Tensor, num_visible: torch.Tensor, keep: int) -> torch.Tensor:
    """As ``reference.block_topk``."""
    block = torch.arange(scores.shape[1], device=scores.device)
    is_visible = block[None, :] < num_visible.long()[:, None]
    masked = scores.float().masked_fill(~is_visible, float("-inf"))
    return torch.sort(masked, dim=-1, descending=True, stable=True).indices[:, :keep]


@triton.jit
def _ordered_key(scores):
    """float32 -> int32 with the same order (-0.0 folded into +0.0, so equal scores tie)."""
    bits = tl.where(scores == 0.0, 0.0, scores).to(tl.int32, bitcast=True)
    return tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)


@triton.jit
def _count_at_least(scores_ptr, count, threshold, BLOCK: tl.constexpr):
    total = tl.zeros((), dtype=tl.int32)
    for start in range(0, count, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        key = _ordered_key(tl.load(scores_ptr + offs, mask=offs < count, other=0.0))
        total += tl.sum(((key >= threshold) & (offs < count)).to(tl.int32), axis=0)
    return total


@triton.jit
def _block_topk_kernel(scores_ptr, visible_ptr, out_ptr, stride_s, stride_o, keep,
                       BLOCK: tl.constexpr):  # fmt: skip
    query = tl.program_id(0).to(tl.int64)
    count = tl.load(visible_ptr + query).to(tl.int32)
    row_ptr = scores_ptr + query * stride_s
    if count <= keep:
        for start in range(0, keep, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            tl.store(out_ptr + query * stride_o + offs, offs.to(tl.int64), mask=offs < keep)
    else:
        # the keep-th largest key: the largest t with at least keep keys >= t (32 halvings)
        low = tl.full((), -2147483648, tl.int64)
        high = tl.full((), 2147483647, tl.int64)
        for _ in range(32):
            mid = low + (high - low + 1) // 2
            if _count_at_least(row_ptr, count, mid.to(tl.int32), BLOCK) >= keep:
                low = mid
            else:
                high = mid - 1
        threshold = low.to(tl.int32)
        ties_kept = keep - _count_at_least(row_ptr, count, threshold + 1, BLOCK)
        written = tl.zeros((), dtype=tl.int32)
        ties_seen = tl.zeros((), dtype=tl.int32)
        for start in range(0, count, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            in_row = offs < count
            key = _ordered_key(tl.load(row_ptr + offs, mask=in_row, other=0.0))
            is_tie = (key == threshold) & in_row
            tie_rank = ties_seen + tl.cumsum(is_tie.to(tl.int32), axis=0)
            is_kept = ((key > threshold) & in_row) | (is_tie & (tie_rank <= ties_kept))
            slot = written + tl.cumsum(is_kept.to(tl.int32), axis=0) - 1
            tl.store(out_ptr + query * stride_o + slot, offs.to(tl.int64), mask=is_kept)
            written += tl.sum(is_kept.to(tl.int32), axis=0)
            ties_seen += tl.sum(is_tie.to(tl.int32), axis=0)


def launch_block_topk(
    scores: torch.Tensor, num_visible: torch.Tensor, keep: int, out: torch.Tensor
) -> None:
    """The selection as one Triton program per query: the same kept set, in block order;
    ``scores`` fp32, ``out`` [N, keep] int64."""
    if scores.dtype != torch.float32 or scores.stride(-1) != 1:
        raise ValueError("block_topk: scores must be float32 and contiguous in the block dim")
    if tuple(out.shape) != (scores.shape[0], keep) or out.dtype != torch.int64:
        raise ValueError(f"block_topk: out must be [{scores.shape[0]}, {keep}] int64")
    if scores.shape[0] == 0 or keep == 0:
        return
    _block_topk_kernel[(scores.shape[0],)](
        scores, num_visible, out, scores.stride(0), out.stride(0), keep, BLOCK=1024
    )
