"""Triton sparse attention over selected positions, online softmax, flash-decoding splits."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ignition.kernels.paged_attention.triton import dot_precision
from ignition.kernels.qsa_sparse_attention import reference

BLOCK_S = 32
# Decode specialisation: aim for about this many programs when queries are few.
TARGET_PROGRAMS = 256


@triton.jit
def _sparse_attention_kernel(
    q_ptr, k_cache_ptr, v_cache_ptr, page_table_ptr, row_ptr, selected_ptr,
    o_ptr, part_max_ptr, part_sum_ptr, part_acc_ptr,
    width, span, head_dim, page_size, num_splits, scale,
    stride_qt, stride_qh, stride_kp, stride_ks, stride_kh, stride_vp, stride_vs, stride_vh,
    stride_pt, stride_st, stride_ot, stride_oh,
    GROUP: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_S: tl.constexpr,
    BLOCK_D: tl.constexpr,
    DIRECT: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):  # fmt: skip
    token = tl.program_id(0).to(tl.int64)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    row = tl.load(row_ptr + token).to(tl.int64)
    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, BLOCK_D)
    mask_g = offs_g < GROUP
    mask_d = offs_d < head_dim
    heads = kv_head * GROUP + offs_g
    q_offs = token * stride_qt + heads[:, None] * stride_qh + offs_d[None, :]
    q = tl.load(q_ptr + q_offs, mask=mask_g[:, None] & mask_d[None, :], other=0)
    score_scale = scale * 1.4426950408889634  # exp2 domain
    max_score = tl.full((BLOCK_G,), float("-inf"), dtype=tl.float32)
    denom = tl.zeros((BLOCK_G,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_G, BLOCK_D), dtype=tl.float32)
    begin = split * span
    end = tl.minimum(begin + span, width)
    for start in range(begin, end, BLOCK_S):
        offs_s = start + tl.arange(0, BLOCK_S)
        pos = tl.load(selected_ptr + token * stride_st + offs_s, mask=offs_s < end, other=-1)
        is_used = pos >= 0
        safe = tl.where(is_used, pos, 0).to(tl.int64)
        page = tl.load(
            page_table_ptr + row * stride_pt + safe // page_size, mask=is_used, other=0
        ).to(tl.int64)
        slot = safe % page_size
        kv_mask = is_used[:, None] & mask_d[None, :]
        k_offs = page[:, None] * stride_kp + slot[:, None] * stride_ks + kv_head * stride_kh
        k = tl.load(k_cache_ptr + k_offs + offs_d[None, :], mask=kv_mask, other=0)
        scores = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * score_scale
        scores = tl.where(is_used[None, :], scores, float("-inf"))
        new_max = tl.maximum(max_score, tl.max(scores, axis=1))
        new_max = tl.where(new_max == float("-inf"), 0.0, new_max)  # nothing selected yet
        correction = tl.exp2(max_score - new_max)
        probs = tl.exp2(scores - new_max[:, None])
        denom = denom * correction + tl.sum(probs, axis=1)
        v_offs = page[:, None] * stride_vp + slot[:, None] * stride_vs + kv_head * stride_vh
        v = tl.load(v_cache_ptr + v_offs + offs_d[None, :], mask=kv_mask, other=0)
        acc = acc * correction[:, None] + tl.dot(
            probs.to(v.dtype), v, input_precision=DOT_PRECISION
        )
        max_score = new_max
    if DIRECT:
        out = acc / tl.where(denom > 0, denom, 1.0)[:, None]
        o_offs = token * stride_ot + heads[:, None] * stride_oh + offs_d[None, :]
        o_mask = mask_g[:, None] & mask_d[None, :]
        tl.store(o_ptr + o_offs, out.to(o_ptr.dtype.element_ty), mask=o_mask)
    else:
        # partials [T, Hkv, splits, G] and [T, Hkv, splits, G, Dh], contiguous
        base = (token * tl.num_programs(1) + kv_head) * num_splits + split
        tl.store(part_max_ptr + base * GROUP + offs_g, max_score, mask=mask_g)
        tl.store(part_sum_ptr + base * GROUP + offs_g, denom, mask=mask_g)
        acc_offs = (base * GROUP + offs_g[:, None]) * head_dim + offs_d[None, :]
        tl.store(part_acc_ptr + acc_offs, acc, mask=mask_g[:, None] & mask_d[None, :])


@triton.jit
def _combine_kernel(
    part_max_ptr, part_sum_ptr, part_acc_ptr, o_ptr,
    num_splits, head_dim, stride_ot, stride_oh,
    GROUP: tl.constexpr,
    BLOCK_P: tl.constexpr,
    BLOCK_D: tl.constexpr,
):  # fmt: skip
    token = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1).to(tl.int64)  # query head = kv_head * GROUP + g
    kv_head = head // GROUP
    g = head % GROUP
    splits = tl.arange(0, BLOCK_P)
    mask_p = splits < num_splits
    offs_d = tl.arange(0, BLOCK_D)
    mask_d = offs_d < head_dim
    base = (token * (tl.num_programs(1) // GROUP) + kv_head) * num_splits + splits
    maxima = tl.load(part_max_ptr + base * GROUP + g, mask=mask_p, other=float("-inf"))
    sums = tl.load(part_sum_ptr + base * GROUP + g, mask=mask_p, other=0.0)
    acc_offs = (base * GROUP + g)[:, None] * head_dim + offs_d[None, :]
    accs = tl.load(part_acc_ptr + acc_offs, mask=mask_p[:, None] & mask_d[None, :], other=0.0)
    # A split that selected nothing holds max 0 (or -inf), sum 0 and acc 0: weight irrelevant.
    top = tl.max(tl.where(sums > 0, maxima, float("-inf")), axis=0)
    top = tl.where(top == float("-inf"), 0.0, top)
    weights = tl.where(sums > 0, tl.exp2(maxima - top), 0.0)
    denom = tl.sum(weights * sums, axis=0)
    out = tl.sum(weights[:, None] * accs, axis=0) / tl.where(denom > 0, denom, 1.0)
    o_offs = token * stride_ot + head * stride_oh + offs_d
    tl.store(o_ptr + o_offs, out.to(o_ptr.dtype.element_ty), mask=mask_d)


def num_splits_for(num_tokens: int, num_kv_heads: int, width: int) -> int:
    """Splits of each selection: 1 when queries alone fill the GPU (prefill), more for decode."""
    most = max(1, triton.cdiv(width, BLOCK_S))
    wanted = triton.cdiv(TARGET_PROGRAMS, max(1, num_tokens * num_kv_heads))
    return max(1, min(most, wanted))


def launch_qsa_sparse_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    page_table: torch.Tensor,
    token_row: torch.Tensor,
    selected: torch.Tensor,
    scale: float,
    out: torch.Tensor,
    num_splits: int | None = None,
) -> None:
    """Run into a preallocated ``out`` [T, H, Dh]; ``num_splits`` None picks by shape."""
    num_tokens, num_heads, head_dim = q.shape
    num_kv = k_cache.shape[2]
    width = selected.shape[1]
    if num_heads % num_kv:
        raise ValueError(f"qsa_sparse_attention: {num_heads} heads are not a multiple of {num_kv}")
    named = (("q", q), ("k_cache", k_cache), ("v_cache", v_cache), ("out", out))
    for name, tensor in (*named, ("selected", selected)):
        if tensor.stride(-1) != 1:
            raise ValueError(f"qsa_sparse_attention: {name} must be contiguous in its last dim")
    if token_row.shape[0] != num_tokens or selected.shape[0] != num_tokens:
        raise ValueError(f"qsa_sparse_attention: token_row and selected need {num_tokens} rows")
    if out.shape != q.shape:
        raise ValueError(f"qsa_sparse_attention: out {tuple(out.shape)} must be {tuple(q.shape)}")
    if num_tokens == 0:
        return
    group = num_heads // num_kv
    splits = num_splits_for(num_tokens, num_kv, width) if num_splits is None else num_splits
    span = triton.cdiv(max(width, 1), splits)
    span = triton.cdiv(span, BLOCK_S) * BLOCK_S  # tiles never straddle two splits
    splits = max(1, triton.cdiv(max(width, 1), span))
    direct = splits == 1
    shape = (num_tokens, num_kv, splits, group)
    part_max = q.new_empty(shape if not direct else (1,), dtype=torch.float32)
    part_sum = torch.empty_like(part_max)
    part_acc = q.new_empty((*shape, head_dim) if not direct else (1,), dtype=torch.float32)
    block_d = max(16, triton.next_power_of_2(head_dim))
    _sparse_attention_kernel[(num_tokens, num_kv, splits)](
        q, k_cache, v_cache, page_table, token_row, selected,
        out, part_max, part_sum, part_acc,
        width, span, head_dim, k_cache.shape[1], splits, scale,
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        page_table.stride(0), selected.stride(0), out.stride(0), out.stride(1),
        GROUP=group,
        BLOCK_G=max(16, triton.next_power_of_2(group)),
        BLOCK_S=BLOCK_S,
        BLOCK_D=block_d,
        DIRECT=direct,
        DOT_PRECISION=dot_precision(q.dtype),
    )  # fmt: skip
    if not direct:
        _combine_kernel[(num_tokens, num_heads)](
            part_max, part_sum, part_acc, out,
            splits, head_dim, out.stride(0), out.stride(1),
            GROUP=group,
            BLOCK_P=triton.next_power_of_2(splits),
            BLOCK_D=block_d,
        )  # fmt: skip


def qsa_sparse_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    page_table: torch.Tensor,
    token_row: torch.Tensor,
    selected: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    out = torch.empty_like(q)
    launch_qsa_sparse_attention(q, k_cache, v_cache, page_table, token_row, selected, scale, out)
    return out


qsa_sparse_attention.__doc__ = reference.qsa_sparse_attention.__doc__
