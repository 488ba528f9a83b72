"""Triton PLE row gather from a possibly pinned host table; padding ids are never read."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_N = 16
MAX_BLOCK_W = 256


@triton.jit
def _gather_rows_kernel(
    table_ptr, ids_ptr, out_ptr, num_ids, num_rows, width,
    stride_table, stride_out,
    BLOCK_N: tl.constexpr, BLOCK_W: tl.constexpr,
):  # fmt: skip
    block = tl.program_id(0)
    lanes = block * BLOCK_N + tl.arange(0, BLOCK_N)
    in_range = lanes < num_ids
    ids = tl.load(ids_ptr + lanes, mask=in_range, other=-1)
    is_row = in_range & (ids >= 0) & (ids < num_rows)
    safe = tl.where(is_row, ids, 0).to(tl.int64)
    for start in range(0, width, BLOCK_W):
        cols = start + tl.arange(0, BLOCK_W)
        col_ok = cols < width
        values = tl.load(
            table_ptr + safe[:, None] * stride_table + cols[None, :],
            mask=is_row[:, None] & col_ok[None, :],
            other=0,
        )
        tl.store(
            out_ptr + lanes[:, None].to(tl.int64) * stride_out + cols[None, :],
            values,
            mask=in_range[:, None] & col_ok[None, :],
        )


def launch_gather_rows(table: torch.Tensor, row_ids: torch.Tensor, out: torch.Tensor) -> None:
    """Launch over preallocated ``out`` (static-buffer programs, CUDA graphs)."""
    for name, tensor in (("table", table), ("out", out)):
        if tensor.dim() != 2 or tensor.stride(1) != 1:
            raise ValueError(f"gather_rows: {name} must be 2-D and contiguous in its last dim")
    if row_ids.dim() != 1 or not row_ids.is_contiguous():
        raise ValueError("gather_rows: row_ids must be a contiguous 1-D tensor")
    if out.shape != (row_ids.shape[0], table.shape[1]) or out.dtype != table.dtype:
        raise ValueError(
            f"gather_rows: out {tuple(out.shape)} {out.dtype}, expected "
            f"{(row_ids.shape[0], table.shape[1])} {table.dtype}"
        )
    num_ids, width = out.shape
    if num_ids == 0:
        return
    if table.element_size() == 1:  # FP8 rows are moved as stored: bytes
        table, out = table.view(torch.uint8), out.view(torch.uint8)
    block_w = min(MAX_BLOCK_W, triton.next_power_of_2(width))
    grid = (triton.cdiv(num_ids, BLOCK_N),)
    _gather_rows_kernel[grid](
        table, row_ids, out, num_ids, table.shape[0], width,
        table.stride(0), out.stride(0),
        BLOCK_N=BLOCK_N, BLOCK_W=block_w,
    )  # fmt: skip


def gather_rows(table: torch.Tensor, row_ids: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """Same contract as :func:`ignition.kernels.row_gather.reference.gather_rows`."""
    launch_gather_rows(table, row_ids, out)
    return out
