"""PyTorch reference of the PLE row gather (docs/ple.md, "host residency on a GPU").

With ``--ple-preload`` on a GPU the whole n-gram table sits in pinned host memory and the
captured program gathers the rows it needs straight from it through unified virtual
addressing: no host round trip, whether the host could name the rows (prompt, pending
tokens) or not (drafts). The op is a row gather whose padding ids (negative, or past the
table: ``compiler.ple_input.NO_ROW``) write zeros, so a static-shape buffer of ids can be
gathered whole without reading outside the table.
"""

from __future__ import annotations

import torch


def gather_rows(table: torch.Tensor, row_ids: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """Write ``table[row_ids[i]]`` into ``out[i]``; out-of-range ids write zeros.

    Shapes:
        table: [R, W] (any dtype; on a GPU usually a device view of pinned host memory);
        row_ids: [N] int64 (padding: negative or >= R); out: [N, W] with ``table``'s dtype.
    Returns ``out``.
    """
    num_rows = table.shape[0]
    is_row = (row_ids >= 0) & (row_ids < num_rows)
    safe = torch.where(is_row, row_ids, torch.zeros_like(row_ids))
    rows = table[safe.to(table.device)].to(out.device)
    out.copy_(torch.where(is_row.to(out.device)[:, None], rows, torch.zeros_like(rows)))
    return out
