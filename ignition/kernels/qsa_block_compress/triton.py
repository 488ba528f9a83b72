"""Triton block-key compression (same signature as ``reference.py``): one program per packed
token; the members are pooled in channel and partner order for the rope (docs/kernels.md)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ignition.kernels.qsa_block_compress import reference


@triton.jit
def _load_members(
    raw_ptr, ring_ptr, draft_ptr, source_ptr, index_ptr, token, channels, mask_d,
    stride_raw, stride_ring, stride_draft,
    RATIO: tl.constexpr,
):  # fmt: skip
    total = tl.zeros(channels.shape, dtype=tl.float32)
    for j in tl.static_range(RATIO):
        source = tl.load(source_ptr + token * RATIO + j)
        index = tl.load(index_ptr + token * RATIO + j).to(tl.int64)
        frame_ptr = raw_ptr + index * stride_raw
        ring_row_ptr = tl.where(
            source == 1, ring_ptr + index * stride_ring, draft_ptr + index * stride_draft
        )
        row_ptr = tl.where(source == 0, frame_ptr, ring_row_ptr)
        member = tl.load(row_ptr + channels, mask=mask_d, other=0.0)
        total += tl.where(mask_d, member.to(tl.float32), 0.0)
    return total


@triton.jit
def _compress_kernel(
    raw_ptr, ring_ptr, draft_ptr, source_ptr, index_ptr, cos_ptr, sin_ptr, scale_ptr,
    slot_ptr, keys_ptr,
    head_dim, half, eps,
    stride_raw, stride_ring, stride_draft, stride_cos, stride_sin, stride_slot,
    RATIO: tl.constexpr,
    BLOCK_D: tl.constexpr,
):  # fmt: skip
    token = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_ptr + token).to(tl.int64)
    if slot < 0:
        return
    offs = tl.arange(0, BLOCK_D)
    mask_d = offs < head_dim
    is_first = offs < half
    is_rotated = offs < 2 * half
    partner = tl.where(is_first, offs + half, tl.where(is_rotated, offs - half, offs))
    args = (raw_ptr, ring_ptr, draft_ptr, source_ptr, index_ptr, token)
    strides = (stride_raw, stride_ring, stride_draft)
    dtype = raw_ptr.dtype.element_ty
    pooled = (_load_members(*args, offs, mask_d, *strides, RATIO) / RATIO).to(dtype)
    pooled_partner = (_load_members(*args, partner, mask_d, *strides, RATIO) / RATIO).to(dtype)
    x = pooled.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / head_dim + eps)
    normed = (x * rstd * tl.load(scale_ptr + offs, mask=mask_d, other=0.0)).to(dtype)
    partner_scale = tl.load(scale_ptr + partner, mask=mask_d, other=0.0)
    normed_partner = (pooled_partner.to(tl.float32) * rstd * partner_scale).to(dtype)
    pair = tl.where(is_first, offs, offs - half)
    cos = tl.load(cos_ptr + token * stride_cos + pair, mask=is_rotated, other=1.0)
    sin = tl.load(sin_ptr + token * stride_sin + pair, mask=is_rotated, other=0.0)
    sign = tl.where(is_first, -1.0, 1.0)
    n, p = normed.to(tl.float32), normed_partner.to(tl.float32)
    rotated = (n * cos + sign * p * sin).to(dtype)
    key = tl.where(is_rotated, rotated, normed)
    tl.store(keys_ptr + slot * stride_slot + offs, key.to(keys_ptr.dtype.element_ty), mask=mask_d)


def compress_block_keys(
    raw: torch.Tensor,
    raw_ring: torch.Tensor,
    draft_ring: torch.Tensor,
    source: torch.Tensor,
    member_index: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    norm_scale: torch.Tensor,
    eps: float,
    slots: torch.Tensor,
    block_keys: torch.Tensor,
) -> None:
    num_tokens, head_dim = raw.shape
    ratio = source.shape[1]
    for name, per_token in (("source", source), ("member_index", member_index), ("cos", cos),
                            ("sin", sin), ("slots", slots)):  # fmt: skip
        if per_token.shape[0] != num_tokens:
            raise ValueError(
                f"compress_block_keys: {name} has {per_token.shape[0]} rows for {num_tokens} keys"
            )
    for name, ring in (("raw_ring", raw_ring), ("draft_ring", draft_ring)):
        if ring.stride(2) != 1 or ring.stride(0) != ratio * ring.stride(1):
            raise ValueError(f"compress_block_keys: {name} rows must be contiguous by slot")
    if block_keys.stride(2) != 1 or block_keys.stride(0) != block_keys.shape[1] * head_dim:
        raise ValueError("compress_block_keys: block_keys pages must be contiguous")
    if not raw.dtype == raw_ring.dtype == draft_ring.dtype:
        raise ValueError(
            f"compress_block_keys: raw {raw.dtype}, raw_ring {raw_ring.dtype} and draft_ring "
            f"{draft_ring.dtype} must share a dtype"
        )
    if raw.stride(1) != 1:
        raise ValueError("compress_block_keys: raw must be contiguous in its last dimension")
    for name, tensor in (("cos", cos), ("sin", sin)):
        if tensor.stride(-1) != 1:
            raise ValueError(f"compress_block_keys: {name} must be contiguous in its last dim")
    for name, tensor in (("source", source), ("member_index", member_index)):
        if not tensor.is_contiguous():
            raise ValueError(f"compress_block_keys: {name} must be contiguous")
    if num_tokens == 0:
        return
    _compress_kernel[(num_tokens,)](
        raw, raw_ring, draft_ring, source, member_index, cos, sin, norm_scale, slots, block_keys,
        head_dim, cos.shape[1], eps,
        raw.stride(0), raw_ring.stride(1), draft_ring.stride(1), cos.stride(0), sin.stride(0),
        block_keys.stride(1),
        RATIO=ratio,
        BLOCK_D=triton.next_power_of_2(head_dim),
    )  # fmt: skip


compress_block_keys.__doc__ = reference.compress_block_keys.__doc__


@triton.jit
def _write_pending_kernel(
    raw_ptr, ring_ptr, rows_ptr, index_ptr, head_dim, stride_raw, stride_row, stride_index,
    BLOCK_D: tl.constexpr,
):  # fmt: skip
    token = tl.program_id(0).to(tl.int64)
    row = tl.load(rows_ptr + token).to(tl.int64)
    index = tl.load(index_ptr + token).to(tl.int64)
    offs = tl.arange(0, BLOCK_D)
    mask = offs < head_dim
    key = tl.load(raw_ptr + token * stride_raw + offs, mask=mask)
    target = ring_ptr + row * stride_row + index * stride_index + offs
    tl.store(target, key.to(ring_ptr.dtype.element_ty), mask=mask)


def write_pending_keys(
    raw: torch.Tensor, ring: torch.Tensor, rows: torch.Tensor, ring_index: torch.Tensor
) -> None:
    if raw.stride(1) != 1 or ring.stride(2) != 1:
        raise ValueError("write_pending_keys: raw and ring must be contiguous in their last dim")
    for name, index in (("rows", rows), ("ring_index", ring_index)):
        if index.shape != raw.shape[:1]:
            raise ValueError(
                f"write_pending_keys: {name} {tuple(index.shape)} must hold one entry per raw key "
                f"({raw.shape[0]})"
            )
    if raw.shape[0] == 0:
        return
    _write_pending_kernel[(raw.shape[0],)](
        raw, ring, rows, ring_index, raw.shape[1], raw.stride(0), ring.stride(0), ring.stride(1),
        BLOCK_D=triton.next_power_of_2(raw.shape[1]),
    )  # fmt: skip


write_pending_keys.__doc__ = reference.write_pending_keys.__doc__
