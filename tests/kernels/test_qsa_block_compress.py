"""QSA's block-key compression: the Triton kernel writes what the reference writes (the mean
of the block's members from the frame, the committed ring or the draft ring, RMS-normed and
roped at the block start) at exactly the slots of tokens that complete a block, and nothing
else (the cache is NaN-filled first)."""

from __future__ import annotations

import pytest
import torch

from ignition.kernels import ops, use_backend
from ignition.kernels.qsa_block_compress import reference
from ignition.kernels.qsa_block_compress.reference import FROM_DRAFT_RING, FROM_FRAME, FROM_RING
from tests.kernels.kernel_tolerances import ATTENTION, INTERPRETER_DTYPES, nan_like

RATIO, DIM, HALF, NUM_SLOTS = 4, 24, 4, 3


def compress_case(dtype: torch.dtype, device, num_tokens: int = 6, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    raw = torch.randn(num_tokens, DIM, generator=gen).to(dtype)
    rings = [torch.randn(NUM_SLOTS + 1, RATIO, DIM, generator=gen).to(dtype) for _ in range(2)]
    source = torch.randint(0, 3, (num_tokens, RATIO), generator=gen, dtype=torch.int32)
    source[:, -1] = FROM_FRAME  # the completing token is in the frame
    frame_index = torch.randint(0, num_tokens, (num_tokens, RATIO), generator=gen)
    ring_index = torch.randint(0, (NUM_SLOTS + 1) * RATIO, (num_tokens, RATIO), generator=gen)
    member_index = torch.where(source == FROM_FRAME, frame_index, ring_index)
    angles = torch.rand(num_tokens, HALF, generator=gen) * 6
    slots = torch.tensor([3, -1, 0, 7, -1, 5][:num_tokens], dtype=torch.int32)
    scale = torch.rand(DIM, generator=gen) + 0.5
    args = (raw, *rings, source, member_index, angles.cos(), angles.sin(), scale, 1e-6, slots)
    return tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in args)


@pytest.mark.parametrize("dtype", INTERPRETER_DTYPES, ids=str)
def test_compressed_block_keys_match_the_reference(dtype, device):
    from ignition.kernels.qsa_block_compress.triton import compress_block_keys

    args = compress_case(dtype, device)
    expected = nan_like(args[0], 4, 2, DIM)
    got = expected.clone()
    reference.compress_block_keys(*args, expected)
    compress_block_keys(*args, got)
    torch.testing.assert_close(got, expected, equal_nan=True, **ATTENTION[dtype])
    assert torch.isnan(got).any(dim=-1).sum() == 8 - 4  # four tokens complete a block


def test_a_block_key_is_the_normed_mean_of_its_members_roped_at_its_start():
    args = compress_case(torch.float32, "cpu", num_tokens=1)
    raw, ring, draft, _, _, cos, sin, scale, eps, _ = args
    source = torch.tensor([[FROM_RING, FROM_DRAFT_RING, FROM_FRAME, FROM_FRAME]], dtype=torch.int32)
    member_index = torch.tensor([[5, 6, 0, 0]])
    keys = torch.zeros(1, 1, DIM)
    slots = torch.tensor([0], dtype=torch.int32)
    reference.compress_block_keys(
        raw, ring, draft, source, member_index, cos, sin, scale, eps, slots, keys
    )
    members = torch.stack([ring.view(-1, DIM)[5], draft.view(-1, DIM)[6], raw[0], raw[0]])
    mean = members.mean(0)
    normed = mean * torch.rsqrt(mean.pow(2).mean() + eps) * scale
    first, second = normed[:HALF], normed[HALF : 2 * HALF]
    rotated = torch.cat([first * cos[0] - second * sin[0], second * cos[0] + first * sin[0]])
    torch.testing.assert_close(keys[0, 0], torch.cat([rotated, normed[2 * HALF :]]))


def test_the_dispatcher_runs_the_compression_kernel_when_forced(device):
    args = compress_case(torch.float32, device)
    expected = nan_like(args[0], 4, 2, DIM)
    got = expected.clone()
    reference.compress_block_keys(*args, expected)
    with use_backend("triton"):
        ops.compress_block_keys(*args, got)
    torch.testing.assert_close(got, expected, equal_nan=True, **ATTENTION[torch.float32])


@pytest.mark.parametrize("dtype", INTERPRETER_DTYPES, ids=str)
def test_pending_raw_keys_are_written_where_the_reference_writes_them(dtype, device):
    from ignition.kernels.qsa_block_compress.triton import write_pending_keys

    gen = torch.Generator().manual_seed(4)
    raw = torch.randn(5, DIM, generator=gen).to(dtype).to(device)
    rows = torch.tensor([0, 2, 2, NUM_SLOTS, 1], device=device)  # one token to the scratch row
    ring_index = torch.tensor([3, 0, 1, 2, 2], device=device)
    expected = nan_like(raw, NUM_SLOTS + 1, RATIO, DIM)
    got = expected.clone()
    reference.write_pending_keys(raw, expected, rows, ring_index)
    write_pending_keys(raw, got, rows, ring_index)
    torch.testing.assert_close(got, expected, equal_nan=True, rtol=0, atol=0)
    assert torch.equal(got[2, 1], raw[2])


def test_a_per_token_index_of_the_wrong_length_is_refused_before_any_write(device):
    from ignition.kernels.qsa_block_compress.triton import write_pending_keys

    raw = torch.zeros(5, DIM, device=device)
    ring = torch.zeros(NUM_SLOTS + 1, RATIO, DIM, device=device)
    short = torch.zeros(4, dtype=torch.long, device=device)
    with pytest.raises(ValueError, match=r"write_pending_keys: rows \(4,\) must hold one entry"):
        write_pending_keys(raw, ring, short, torch.zeros(5, dtype=torch.long, device=device))
