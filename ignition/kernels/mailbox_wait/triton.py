"""Triton in-graph PLE mailbox wait: one program, system-scope release/acquire (docs/kernels.md)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ignition.kernels.mailbox_wait.reference import ASKED_NOTHING, READY, TIMED_OUT

BLOCK = 1024


@triton.jit
def _publish_and_wait_kernel(
    ids_ptr, mailbox_ids_ptr, request_ptr, ready_ptr, sequence_ptr, status_ptr,
    num_ids, max_spins,
    BLOCK: tl.constexpr, READY: tl.constexpr, TIMED_OUT: tl.constexpr,
    ASKED_NOTHING: tl.constexpr,
):  # fmt: skip
    num_asked = tl.full((), 0, tl.int32)
    for start in range(0, num_ids, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        in_range = offs < num_ids
        ids = tl.load(ids_ptr + offs, mask=in_range, other=-1)
        tl.store(mailbox_ids_ptr + offs, ids, mask=in_range)
        num_asked += tl.sum((ids >= 0).to(tl.int32), axis=0)
    status = tl.full((), ASKED_NOTHING, tl.int32)
    if num_asked > 0:
        asked = tl.load(sequence_ptr) + 1
        tl.store(sequence_ptr, asked)
        tl.store(request_ptr + 1, num_ids.to(tl.int64))
        tl.debug_barrier()
        tl.atomic_xchg(request_ptr, asked, sem="release", scope="sys")
        seen = tl.load(ready_ptr, volatile=True)
        spins = 0
        while (seen != asked) & (spins < max_spins):
            seen = tl.load(ready_ptr, volatile=True)
            spins += 1
        seen = tl.atomic_add(ready_ptr, 0, sem="acquire", scope="sys")
        status = tl.where(seen == asked, READY, TIMED_OUT).to(tl.int32)
    tl.store(status_ptr, status)


def launch_publish_and_wait(
    row_ids: torch.Tensor,
    mailbox_ids: torch.Tensor,
    request: torch.Tensor,
    ready: torch.Tensor,
    sequence: torch.Tensor,
    status: torch.Tensor,
    max_spins: int,
) -> None:
    """Launch over preallocated buffers (captured programs)."""
    for name, tensor in (
        ("row_ids", row_ids),
        ("mailbox_ids", mailbox_ids),
        ("request", request),
        ("ready", ready),
        ("sequence", sequence),
    ):
        if tensor.dtype != torch.int64 or not tensor.is_contiguous():
            raise ValueError(f"publish_and_wait: {name} must be contiguous int64")  # fmt: skip
    if mailbox_ids.shape[0] < row_ids.shape[0]:
        raise ValueError(
            f"publish_and_wait: mailbox of {mailbox_ids.shape[0]} ids, {row_ids.shape[0]} asked"
        )
    if status.dtype != torch.int32:
        raise ValueError("publish_and_wait: status must be int32")
    _publish_and_wait_kernel[(1,)](
        row_ids, mailbox_ids, request, ready, sequence, status,
        row_ids.shape[0], max_spins,
        BLOCK=BLOCK, READY=READY, TIMED_OUT=TIMED_OUT, ASKED_NOTHING=ASKED_NOTHING,
    )  # fmt: skip


def publish_and_wait(
    row_ids: torch.Tensor,
    mailbox_ids: torch.Tensor,
    request: torch.Tensor,
    ready: torch.Tensor,
    sequence: torch.Tensor,
    status: torch.Tensor,
    max_spins: int,
) -> torch.Tensor:
    """Same contract as :func:`ignition.kernels.mailbox_wait.reference.publish_and_wait`."""
    launch_publish_and_wait(row_ids, mailbox_ids, request, ready, sequence, status, max_spins)
    return status
