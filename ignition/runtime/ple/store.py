"""Where the PLE n-gram table lives, behind one protocol: row ids in, rows out."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol

import torch

from ignition.runtime.ple.cache import RowCache
from ignition.runtime.ple.stats import PleStats
from ignition.runtime.ple.table import TableLayout

RESIDENCIES = ("device", "host", "disk")
# A default device residency leaves three quarters of the free device memory to the model,
# its states and pages; a default host residency half of host memory to everything else.
DEVICE_SHARE = 0.25
HOST_SHARE = 0.5
DEFAULT_CACHE_BYTES = 1 << 30


class RowStore(Protocol):
    residency: str
    layout: TableLayout
    stats: PleStats

    def gather(self, row_ids: torch.Tensor, out: torch.Tensor) -> None:
        """Rows of ``row_ids`` (any shape, int64) into ``out`` [*row_ids.shape, row_width]."""
        ...


def raw_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype rows are moved as: FP8 as bytes, everything else as itself."""
    return torch.uint8 if dtype in (torch.float8_e4m3fn, torch.float8_e5m2) else dtype


def _gather_pieces(pieces: list[torch.Tensor], starts: torch.Tensor, ids, out) -> None:
    """Global ids [N] into out [N, width] from row-concatenated pieces."""
    if len(pieces) == 1:
        torch.index_select(pieces[0], 0, ids, out=out)
        return
    which = torch.searchsorted(starts, ids, right=True) - 1
    for k in torch.unique(which).tolist():
        mask = which == k
        out[mask] = pieces[k].index_select(0, ids[mask] - starts[k])


def _check_ids(layout: TableLayout, ids: torch.Tensor) -> None:
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= layout.num_rows):
        raise IndexError(
            f"PLE row ids span [{int(ids.min())}, {int(ids.max())}], the table has "
            f"{layout.num_rows} rows"
        )


class DeviceStore:
    """The whole table in one device tensor; the program gathers it with an index-select."""

    residency = "device"

    def __init__(self, layout: TableLayout, device: torch.device, **_: object) -> None:
        self.layout = layout
        raw = raw_dtype(layout.dtype)
        self.table = torch.cat([p.view(raw) for p in layout.map_pieces()]).to(device)
        self.stats = PleStats(self.residency, layout.table_bytes)

    def gather(self, row_ids: torch.Tensor, out: torch.Tensor) -> None:
        ids = row_ids.reshape(-1).to(self.table.device)
        _check_ids(self.layout, ids)
        rows = out.view(raw_dtype(out.dtype)).view(-1, self.layout.row_width)
        if rows.device == self.table.device:
            torch.index_select(self.table, 0, ids, out=rows)
        else:  # host staging of device rows (the mailbox's buffers live on the host)
            rows.copy_(self.table.index_select(0, ids))
        self.stats.add_gather(ids.numel(), ids.numel() * self.layout.row_bytes)


class HostStore:
    """The mapped pieces, or (``preload``) one copy in pinned host memory."""

    residency = "host"

    def __init__(
        self, layout: TableLayout, device: torch.device, preload: bool = False, **_: object
    ) -> None:
        self.layout = layout
        pieces = [p.view(raw_dtype(layout.dtype)) for p in layout.map_pieces()]
        if preload:
            table = torch.cat(pieces)
            pieces = [table.pin_memory() if device.type == "cuda" else table]
        self.pieces = pieces
        # the whole table in one (pinned on CUDA) tensor: what the UVA gather reads
        self.preloaded = pieces[0].view(layout.dtype) if preload else None
        self.starts = torch.tensor([p.first_row for p in layout.pieces], dtype=torch.int64)
        self.stats = PleStats(self.residency, layout.table_bytes)

    def gather(self, row_ids: torch.Tensor, out: torch.Tensor) -> None:
        ids = row_ids.reshape(-1).cpu()
        _check_ids(self.layout, ids)
        rows = out.view(raw_dtype(out.dtype)).view(-1, self.layout.row_width)
        _gather_pieces(self.pieces, self.starts, ids, rows)
        self.stats.add_gather(ids.numel(), ids.numel() * self.layout.row_bytes)


class DiskStore:
    """The mapped pieces, never preloaded, behind an exact LRU cache of ``cache_bytes``."""

    residency = "disk"

    def __init__(
        self,
        layout: TableLayout,
        device: torch.device,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        **_: object,
    ) -> None:
        self.layout = layout
        self.raw = raw_dtype(layout.dtype)
        self.pieces = [p.view(self.raw) for p in layout.map_pieces()]
        self.starts = torch.tensor([p.first_row for p in layout.pieces], dtype=torch.int64)
        # never more room than the table has rows (the cache keeps a free-slot list)
        self.cache = RowCache(min(cache_bytes, layout.table_bytes), layout.row_width, self.raw)
        self.stats = PleStats(self.residency, layout.table_bytes)
        self._unique_rows = torch.empty(0, layout.row_width, dtype=self.raw)

    def gather(self, row_ids: torch.Tensor, out: torch.Tensor) -> None:
        ids = row_ids.reshape(-1).cpu()
        _check_ids(self.layout, ids)
        unique, inverse = torch.unique(ids, return_inverse=True)
        if len(unique) > len(self._unique_rows):  # grows to the widest frame, then stays
            self._unique_rows = torch.empty(len(unique), self.layout.row_width,
                                            dtype=self.raw)  # fmt: skip
        rows = self._unique_rows[: len(unique)]
        hits, misses = self.cache.hits, self.cache.misses

        def read(miss_ids: torch.Tensor, dst: torch.Tensor) -> None:
            _gather_pieces(self.pieces, self.starts, miss_ids, dst)

        self.cache.gather(unique.tolist(), rows, read)
        flat = out.view(self.raw).view(-1, self.layout.row_width)
        torch.index_select(rows, 0, inverse, out=flat)
        new_misses = self.cache.misses - misses
        self.stats.add_gather(
            ids.numel(), new_misses * self.layout.row_bytes, self.cache.hits - hits, new_misses
        )


STORES: dict[str, Callable[..., RowStore]] = {
    "device": DeviceStore,
    "host": HostStore,
    "disk": DiskStore,
}


def open_store(
    layout: TableLayout,
    residency: str,
    device: torch.device,
    *,
    preload: bool = False,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
) -> RowStore:
    if residency not in STORES:
        raise ValueError(f"ple residency = {residency!r}: one of {', '.join(RESIDENCIES)}")
    return STORES[residency](layout, device, preload=preload, cache_bytes=cache_bytes)


def host_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def choose_residency(
    table_bytes: int,
    device: torch.device,
    device_free_bytes: int | None = None,
    host_bytes: int | None = None,
) -> str:
    """The default residency: device if the table fits a quarter of it, else host or disk."""
    host = host_memory_bytes() if host_bytes is None else host_bytes
    fits_host = table_bytes <= HOST_SHARE * host
    if device.type != "cuda":
        return "device" if fits_host else "disk"
    if device_free_bytes is None:
        device_free_bytes, _ = torch.cuda.mem_get_info(device)
    if table_bytes <= DEVICE_SHARE * device_free_bytes:
        return "device"
    return "host" if fits_host else "disk"
