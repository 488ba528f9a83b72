"""Triton packed paged attention and KV write; a static grid of cdiv(T, BLOCK_Q) + R programs."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ignition.kernels.paged_attention import reference

BLOCK_Q = 16
BLOCK_N = 32


def dot_precision(dtype: torch.dtype) -> str:
    """fp32 operands would default to TF32 (~1e-3 relative); tf32x3 keeps them near fp32."""
    return "tf32x3" if dtype == torch.float32 else "tf32"


@triton.jit
def _packed_paged_attention_kernel(
    q_ptr, k_cache_ptr, v_cache_ptr, page_table_ptr, cu_ptr, context_ptr, o_ptr,
    num_rows, num_tokens, scale,
    stride_qt, stride_qh,
    stride_kp, stride_ks, stride_kh,
    stride_vp, stride_vs, stride_vh,
    stride_pt_row,
    stride_ot, stride_oh,
    page_size, head_dim,
    GROUP: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    head = tl.program_id(1)
    kv_head = head // GROUP
    offs_d = tl.arange(0, BLOCK_D)
    mask_d = offs_d < head_dim
    offs_q = tl.arange(0, BLOCK_Q)

    # Which row owns this program: count the row block starts at or before pid.
    offs_r = tl.arange(0, BLOCK_R)
    cu_all = tl.load(cu_ptr + offs_r, mask=offs_r <= num_rows, other=num_tokens)
    block_starts = cu_all // BLOCK_Q + offs_r
    in_range = (block_starts <= pid) & (offs_r <= num_rows)
    row = tl.sum(in_range.to(tl.int32), axis=0) - 1
    row_block_start = tl.max(tl.where(in_range, block_starts, -1), axis=0)
    local_block = pid - row_block_start

    if row == num_rows:
        # Past the last row: zero this program's share of the unused packed capacity.
        packed_end = tl.load(cu_ptr + num_rows)
        tokens = packed_end + local_block * BLOCK_Q + offs_q
        zero_mask = (tokens < num_tokens)[:, None] & mask_d[None, :]
        zeros = tl.zeros((BLOCK_Q, BLOCK_D), dtype=o_ptr.dtype.element_ty)
        o_offs = tokens[:, None] * stride_ot + head * stride_oh + offs_d[None, :]
        tl.store(o_ptr + o_offs, zeros, mask=zero_mask)
        return

    row_start = tl.load(cu_ptr + row)
    query_len = tl.load(cu_ptr + row + 1) - row_start
    if local_block * BLOCK_Q >= query_len:
        return
    context_len = tl.load(context_ptr + row)
    local_q = local_block * BLOCK_Q + offs_q
    mask_q = local_q < query_len
    query_pos = context_len - query_len + local_q  # [BLOCK_Q]
    tokens = row_start + local_q

    q_offs = tokens[:, None] * stride_qt + head * stride_qh + offs_d[None, :]
    q = tl.load(q_ptr + q_offs, mask=mask_q[:, None] & mask_d[None, :], other=0.0)
    score_scale = scale * 1.4426950408889634  # exp2 domain; applied to fp32 scores, not to q

    max_score = tl.full((BLOCK_Q,), float("-inf"), dtype=tl.float32)
    denom = tl.zeros((BLOCK_Q,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_Q, BLOCK_D), dtype=tl.float32)
    key_end = tl.minimum(context_len, context_len - query_len + (local_block + 1) * BLOCK_Q)
    for key_start in range(0, key_end, BLOCK_N):
        key_pos = key_start + tl.arange(0, BLOCK_N)
        mask_k = key_pos < key_end
        pages = tl.load(
            page_table_ptr + row * stride_pt_row + key_pos // page_size, mask=mask_k, other=0
        ).to(tl.int64)
        slot = key_pos % page_size
        k_offs = pages[:, None] * stride_kp + slot[:, None] * stride_ks + kv_head * stride_kh
        kv_mask = mask_k[:, None] & mask_d[None, :]
        k = tl.load(k_cache_ptr + k_offs + offs_d[None, :], mask=kv_mask, other=0.0)
        scores = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * score_scale
        visible = (key_pos[None, :] <= query_pos[:, None]) & mask_k[None, :]
        scores = tl.where(visible, scores, float("-inf"))
        new_max = tl.maximum(max_score, tl.max(scores, axis=1))
        new_max = tl.where(new_max == float("-inf"), 0.0, new_max)  # fully masked padded rows
        correction = tl.exp2(max_score - new_max)
        probs = tl.exp2(scores - new_max[:, None])
        denom = denom * correction + tl.sum(probs, axis=1)
        v_offs = pages[:, None] * stride_vp + slot[:, None] * stride_vs + kv_head * stride_vh
        v = tl.load(v_cache_ptr + v_offs + offs_d[None, :], mask=kv_mask, other=0.0)
        acc = acc * correction[:, None] + tl.dot(
            probs.to(v.dtype), v, input_precision=DOT_PRECISION
        )
        max_score = new_max

    out = acc / tl.where(denom > 0, denom, 1.0)[:, None]
    o_offs = tokens[:, None] * stride_ot + head * stride_oh + offs_d[None, :]
    tl.store(o_ptr + o_offs, out.to(o_ptr.dtype.element_ty), mask=mask_q[:, None] & mask_d[None, :])


def launch_packed_paged_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    page_table: torch.Tensor,
    cu_query_lens: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
    out: torch.Tensor,
) -> None:
    """Run the kernel into a preallocated ``out`` [T, H, Dh] (static buffers, CUDA graphs)."""
    num_tokens, num_heads, head_dim = q.shape
    num_rows = page_table.shape[0]
    num_kv_heads = k_cache.shape[2]
    if num_heads % num_kv_heads:
        raise ValueError(f"{num_heads} query heads are not a multiple of {num_kv_heads} kv heads")
    for name, tensor in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache), ("out", out)):
        if tensor.stride(-1) != 1:
            raise ValueError(f"{name} must be contiguous in its head dimension")
    grid = (triton.cdiv(num_tokens, BLOCK_Q) + num_rows, num_heads)
    _packed_paged_attention_kernel[grid](
        q, k_cache, v_cache, page_table, cu_query_lens, context_lens, out,
        num_rows, num_tokens, scale,
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        page_table.stride(0),
        out.stride(0), out.stride(1),
        k_cache.shape[1], head_dim,
        GROUP=num_heads // num_kv_heads,
        BLOCK_R=triton.next_power_of_2(num_rows + 1),
        BLOCK_Q=BLOCK_Q,
        BLOCK_N=BLOCK_N,
        BLOCK_D=max(16, triton.next_power_of_2(head_dim)),
        DOT_PRECISION=dot_precision(q.dtype),
    )  # fmt: skip


def packed_paged_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    page_table: torch.Tensor,
    cu_query_lens: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    out = torch.empty_like(q)
    launch_packed_paged_attention(
        q, k_cache, v_cache, page_table, cu_query_lens, context_lens, scale, out
    )
    return out


packed_paged_attention.__doc__ = reference.packed_paged_attention.__doc__


@triton.jit
def _write_paged_kv_kernel(
    k_ptr, v_ptr, k_cache_ptr, v_cache_ptr, slot_ptr,
    stride_kt, stride_vt, stride_kc_slot, stride_vc_slot, row_size,
    BLOCK: tl.constexpr,
):  # fmt: skip
    token = tl.program_id(0)
    slot = tl.load(slot_ptr + token).to(tl.int64)
    if slot < 0:
        return
    offs = tl.arange(0, BLOCK)
    mask = offs < row_size
    k = tl.load(k_ptr + token * stride_kt + offs, mask=mask)
    v = tl.load(v_ptr + token * stride_vt + offs, mask=mask)
    tl.store(k_cache_ptr + slot * stride_kc_slot + offs, k.to(k_cache_ptr.dtype.element_ty), mask)
    tl.store(v_cache_ptr + slot * stride_vc_slot + offs, v.to(v_cache_ptr.dtype.element_ty), mask)


def write_paged_kv(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    num_tokens = k.shape[0]
    row_size = k.shape[1] * k.shape[2]  # one token's [Hkv, Dh], contiguous
    for name, tensor in (("k", k), ("v", v), ("k_cache", k_cache), ("v_cache", v_cache)):
        if tensor.stride(-1) != 1 or tensor.stride(-2) != tensor.shape[-1]:
            raise ValueError(f"{name} must be contiguous over its kv heads and head dimension")
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        if cache.stride(0) != cache.shape[1] * cache.stride(1):
            raise ValueError(f"{name} pages must be contiguous so that flat slots address them")
    if num_tokens == 0:
        return
    _write_paged_kv_kernel[(num_tokens,)](
        k, v, k_cache, v_cache, slot_mapping,
        k.stride(0), v.stride(0), k_cache.stride(1), v_cache.stride(1), row_size,
        BLOCK=triton.next_power_of_2(row_size),
    )  # fmt: skip


write_paged_kv.__doc__ = reference.write_paged_kv.__doc__
