"""Index arithmetic over one image's patch grid, in spatial-merge-block order."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class ImageGrid:
    """An image's patch grid: temporal, height and width in patches (before merging)."""

    t: int
    h: int
    w: int

    @property
    def num_patches(self) -> int:
        return self.t * self.h * self.w

    def num_features(self, merge: int) -> int:
        """Features the merger emits, which is also the prompt's placeholder count."""
        return self.num_patches // (merge * merge)


def patch_rows_cols(grid: ImageGrid, merge: int) -> tuple[Tensor, Tensor]:
    """Row and column of every patch, in merge-block order, repeated for each frame."""
    rows = (
        torch.arange(grid.h)
        .view(grid.h // merge, merge, 1, 1)
        .expand(-1, -1, grid.w // merge, merge)
    )
    cols = (
        torch.arange(grid.w)
        .view(1, 1, grid.w // merge, merge)
        .expand(grid.h // merge, merge, -1, -1)
    )
    rows = rows.permute(0, 2, 1, 3).reshape(-1).repeat(grid.t)
    cols = cols.permute(0, 2, 1, 3).reshape(-1).repeat(grid.t)
    return rows, cols


def interpolation_taps(grid: ImageGrid, merge: int, side: int) -> tuple[Tensor, Tensor]:
    """Bilinear (corner-aligned) taps into a ``side x side`` position table: indices and
    weights, both [patches, 4]."""
    rows, cols = patch_rows_cols(grid, merge)
    row_idx, row_w = _axis_taps(rows, grid.h, side)
    col_idx, col_w = _axis_taps(cols, grid.w, side)
    index = (row_idx[:, :, None] * side + col_idx[:, None, :]).reshape(-1, 4)
    weight = (row_w[:, :, None] * col_w[:, None, :]).reshape(-1, 4)
    return index, weight


def _axis_taps(coord: Tensor, size: int, side: int) -> tuple[Tensor, Tensor]:
    src = coord.to(torch.float32) * (side - 1) / max(size - 1, 1)
    low = src.floor()
    frac = src - low
    low = low.long().clamp(0, side - 1)
    high = (low + 1).clamp(0, side - 1)
    return torch.stack([low, high], dim=1), torch.stack([1 - frac, frac], dim=1)
