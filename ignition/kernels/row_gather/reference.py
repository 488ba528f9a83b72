"""PyTorch reference of the PLE row gather; padding ids write zeros (docs/ple.md)."""

from __future__ import annotations

import torch


def gather_rows(table: torch.Tensor, row_ids: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """Write ``table[row_ids[i]]`` into ``out[i]``: table [R, W], row_ids [N] int64 (padding
    negative or >= R, writes zeros), out [N, W]. Returns ``out``."""
    num_rows = table.shape[0]
    is_row = (row_ids >= 0) & (row_ids < num_rows)
    safe = torch.where(is_row, row_ids, torch.zeros_like(row_ids))
    rows = table[safe.to(table.device)].to(out.device)
    out.copy_(torch.where(is_row.to(out.device)[:, None], rows, torch.zeros_like(rows)))
    return out
