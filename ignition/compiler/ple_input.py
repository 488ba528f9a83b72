"""A program's staged PLE rows: the n-gram table rows the host resolved before launch.

Per PLE layer, ``ids`` [N] sorted global row ids padded with ``NO_ROW`` and ``rows``
[N, head_dim]; the program binary-searches its own row ids there. A row not found is asked
through ``resolve`` (the mailbox) or the in-graph mailbox. Details: docs/ple.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import torch
from torch import Tensor

from ignition.model.packing import PackedMeta

NO_ROW = torch.iinfo(torch.int64).max  # the ids buffer's padding: sorts after every row

# missing global row ids [M] (unique) -> their rows [M, head_dim], waiting for the host
Resolver = Callable[[Tensor], Tensor]
# (PLE layer, row ids [N], -1 = none) -> rows [N, head_dim]; capturable
GraphResolver = Callable[[int, Tensor], Tensor]


@dataclass
class PleRowsInput:
    """The staged rows every program binds (whole buffers: the search needs no length)."""

    ids: list[Tensor]  # per PLE layer [N] int64 sorted global row ids, NO_ROW padding
    rows: list[Tensor]  # per PLE layer [N, head_dim]
    offsets: list[int]  # per PLE layer: its first row in the concatenated table
    # Set by the runtime for host / disk residency; None reads the model's own table.
    is_enabled: bool = False
    # The in-program mailbox (runtime.ple.delivery); None: every row must be staged.
    resolve: Resolver | None = None
    num_resolved: list[int] = field(default_factory=lambda: [0])  # rows asked in-program
    # The in-graph mailbox (GPU); replaces ``resolve`` when set.
    resolve_in_graph: GraphResolver | None = None

    def lookups(self) -> list[Callable[[Tensor, PackedMeta], Tensor]]:
        """One row lookup per PLE layer, as the model's ``gathering_ple_rows`` takes them."""
        return [self._lookup(p) for p in range(len(self.ids))]

    def _lookup(self, layer: int) -> Callable[[Tensor, PackedMeta], Tensor]:
        def lookup(row_ids: Tensor, meta: PackedMeta) -> Tensor:
            return self.gather(layer, row_ids, meta.is_token_valid)

        return lookup

    def gather(self, layer: int, row_ids: Tensor, is_token_valid: Tensor) -> Tensor:
        """[T, heads] layer-local row ids -> [T, heads, head_dim] rows."""
        num_tokens, heads = row_ids.shape
        ids, table = self.ids[layer], self.rows[layer]
        wanted = row_ids.reshape(-1) + self.offsets[layer]
        at = torch.searchsorted(ids, wanted).clamp(max=ids.shape[0] - 1)
        is_found = ids[at] == wanted
        rows = table[at]  # a new tensor: filling its misses leaves the staging untouched
        is_needed = is_token_valid[:, None].expand(num_tokens, heads).reshape(-1)
        missing = is_needed & ~is_found
        if self.resolve_in_graph is not None:  # no host sync: the kernel skips an empty ask
            asked = torch.where(missing, wanted, torch.full_like(wanted, -1))
            resolved = self.resolve_in_graph(layer, asked).to(dtype=table.dtype)
            rows = torch.where(missing[:, None], resolved, rows)
            return rows.view(num_tokens, heads, -1)
        if bool(missing.any()):  # on a GPU this needs the in-graph mailbox (docs/ple.md)
            if self.resolve is None:
                raise RuntimeError(
                    f"PLE layer {layer}: {int(missing.sum())} rows were not staged and the "
                    "program has no mailbox to resolve them"
                )
            unique, inverse = torch.unique(wanted[missing], return_inverse=True)
            resolved = self.resolve(unique).to(device=table.device, dtype=table.dtype)
            rows[missing] = resolved[inverse]
            self.num_resolved[0] += int(unique.numel())
        return rows.view(num_tokens, heads, -1)


def allocate_ple_rows(
    capacities: list[int],
    widths: list[int],
    offsets: list[int],
    dtype: torch.dtype,
    device: torch.device,
) -> PleRowsInput:
    """The workspace's staged-row buffers, one pair per PLE layer, all padding."""
    ids = [torch.full((n,), NO_ROW, dtype=torch.int64, device=device) for n in capacities]
    rows = [
        torch.zeros(n, w, dtype=dtype, device=device)
        for n, w in zip(capacities, widths, strict=True)
    ]
    return PleRowsInput(ids, rows, list(offsets))


class RowBuffers(Protocol):
    """Per-layer id and row buffers (a program's or a staging set's)."""

    ids: list[Tensor]
    rows: list[Tensor]


def stage_rows(staged: RowBuffers, layer: int, ids: Tensor, rows: Tensor) -> None:
    """Write one layer's resolved rows (``ids`` sorted, unique) and pad the rest."""
    n = ids.numel()
    capacity = staged.ids[layer].shape[0]
    if n > capacity:
        raise ValueError(f"PLE layer {layer}: {n} staged rows, the workspace holds {capacity}")
    non_blocking = staged.ids[layer].is_cuda
    staged.ids[layer][:n].copy_(ids, non_blocking=non_blocking)
    staged.ids[layer][n:].fill_(NO_ROW)
    staged.rows[layer][:n].copy_(rows, non_blocking=non_blocking)
