"""Triton device confidence allocation: one program ranks every (lane, prefix) candidate by
counting those that beat it (the reference's order), so no sort and no host sync."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ignition.kernels.speculative_allocation import reference

BLOCK_OTHERS = 16


@triton.jit
def _allocate_speculative_prefixes_kernel(
    probs_ptr, ceiling_ptr, query_lens_ptr, confidence_ptr,
    num_lanes, depth, packed_capacity,
    stride_probs_r, stride_conf_kind, stride_conf_r,
    BLOCK_R: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_J: tl.constexpr,
):  # fmt: skip
    lanes = tl.arange(0, BLOCK_R)
    positions = tl.arange(0, BLOCK_D)
    mask_r = lanes < num_lanes
    mask_d = positions < depth
    mask = mask_r[:, None] & mask_d[None, :]
    ceilings = tl.load(ceiling_ptr + lanes, mask=mask_r, other=0)
    is_active = ceilings > 0

    probs = tl.load(
        probs_ptr + lanes[:, None] * stride_probs_r + positions[None, :], mask=mask, other=0.0
    ).to(tl.float32)
    probs = tl.where(is_active[:, None], probs, 0.0)
    # Sequential fp32 products; torch.cumprod may round differently (last bit) on CPU.
    joint = tl.zeros((BLOCK_R, BLOCK_D), dtype=tl.float32)
    running = tl.full((BLOCK_R,), 1.0, dtype=tl.float32)
    for d in range(depth):
        running = running * tl.sum(tl.where(positions[None, :] == d, probs, 0.0), axis=1)
        joint = tl.where(positions[None, :] == d, running[:, None], joint)
    conf_offs = lanes[:, None] * stride_conf_r + positions[None, :]
    tl.store(confidence_ptr + conf_offs, probs, mask=mask)
    tl.store(confidence_ptr + stride_conf_kind + conf_offs, joint, mask=mask)
    tl.debug_barrier()

    # Flat index d * num_lanes + r orders ties by prefix, then lane.
    eligible = (positions[None, :] + 1 < ceilings[:, None]) & mask
    value = tl.where(eligible, joint, -1.0)
    flat = positions[None, :] * num_lanes + lanes[:, None]
    rank = tl.zeros((BLOCK_R, BLOCK_D), dtype=tl.int32)
    for start in range(0, num_lanes * depth, BLOCK_J):
        others = start + tl.arange(0, BLOCK_J)
        other_lane = others % num_lanes
        other_pos = others // num_lanes
        in_range = others < num_lanes * depth
        other_ceiling = tl.load(ceiling_ptr + other_lane, mask=in_range, other=0)
        other_joint = tl.load(
            confidence_ptr + stride_conf_kind + other_lane * stride_conf_r + other_pos,
            mask=in_range,
            other=0.0,
        )
        other_value = tl.where(in_range & (other_pos + 1 < other_ceiling), other_joint, -1.0)
        beats = (other_value[None, None, :] > value[:, :, None]) | (
            (other_value[None, None, :] == value[:, :, None])
            & (others[None, None, :] < flat[:, :, None])
        )
        beats = beats & in_range[None, None, :]
        rank += tl.sum(beats.to(tl.int32), axis=2)

    budget = packed_capacity - tl.sum(is_active.to(tl.int32), axis=0)
    admitted = eligible & (rank < budget)
    query_lens = is_active.to(tl.int32) + tl.sum(admitted.to(tl.int32), axis=1)
    tl.store(query_lens_ptr + lanes, query_lens, mask=mask_r)


def launch_allocate_speculative_prefixes(
    draft_probs: torch.Tensor,
    lane_ceilings: torch.Tensor,
    packed_capacity: int,
    query_lens: torch.Tensor,
    confidence: torch.Tensor,
) -> None:
    """Run the kernel into preallocated ``query_lens`` [R] int32 and ``confidence`` [2, R, D]."""
    num_lanes, depth = draft_probs.shape
    if packed_capacity < num_lanes:
        raise ValueError(
            f"packed_capacity {packed_capacity} is below the {num_lanes} lanes: every lane "
            "needs room for its pending token"
        )
    if draft_probs.stride(-1) != 1 or confidence.stride(-1) != 1:
        raise ValueError("draft_probs and confidence must be contiguous over draft positions")
    if confidence.dtype != torch.float32:
        raise ValueError(f"confidence must be float32, got {confidence.dtype}")
    if num_lanes == 0:
        return
    _allocate_speculative_prefixes_kernel[(1,)](
        draft_probs, lane_ceilings, query_lens, confidence,
        num_lanes, depth, packed_capacity,
        draft_probs.stride(0), confidence.stride(0), confidence.stride(1),
        BLOCK_R=max(16, triton.next_power_of_2(num_lanes)),
        BLOCK_D=max(16, triton.next_power_of_2(depth)),
        BLOCK_J=BLOCK_OTHERS,
    )  # fmt: skip


def allocate_speculative_prefixes(
    draft_probs: torch.Tensor,
    lane_ceilings: torch.Tensor,
    packed_capacity: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    num_lanes, depth = draft_probs.shape
    device = draft_probs.device
    query_lens = torch.empty(num_lanes, dtype=torch.int32, device=device)
    confidence = torch.empty(2, num_lanes, depth, dtype=torch.float32, device=device)
    launch_allocate_speculative_prefixes(
        draft_probs, lane_ceilings, packed_capacity, query_lens, confidence
    )
    return query_lens, confidence


allocate_speculative_prefixes.__doc__ = reference.allocate_speculative_prefixes.__doc__
