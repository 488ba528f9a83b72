"""Double-buffered host staging for a frame's known PLE rows (docs/ple.md).

Like ``staging.HostStaging``: two pinned host sets alternate per frame, and a set is
refilled only after the copies reading it have run. Plain tensors on CPU.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from ignition.compiler.ple_input import PleRowsInput, stage_rows
from ignition.compiler.staging import NUM_STAGING_SETS


class Fence(Protocol):
    """What a staging set waits on before it is rewritten (``torch.cuda.Event``)."""

    def record(self) -> None: ...

    def synchronize(self) -> None: ...


class _NoFence:
    def record(self) -> None:
        return None

    def synchronize(self) -> None:
        return None


@dataclass
class _StagingSet:
    ids: list[Tensor]  # per PLE layer [N] int64, host
    rows: list[Tensor]  # per PLE layer [N, width], host
    fence: Fence


class PleStaging:
    """``NUM_STAGING_SETS`` host copies of a program's PLE buffers, used in turn."""

    def __init__(self, staged: PleRowsInput, fence: Callable[[], Fence] | None = None) -> None:
        device = staged.ids[0].device
        is_cuda = device.type == "cuda"
        if fence is None:
            fence = torch.cuda.Event if is_cuda else _NoFence

        def host(t: Tensor) -> Tensor:
            copy = torch.empty(t.shape, dtype=t.dtype)
            return copy.pin_memory() if is_cuda else copy

        self.sets = [
            _StagingSet([host(t) for t in staged.ids], [host(t) for t in staged.rows], fence())
            for _ in range(NUM_STAGING_SETS)
        ]
        self.non_blocking = is_cuda
        self._next = 0

    def stage(self, staged: PleRowsInput, parts: Sequence[tuple[Tensor, Tensor]]) -> int:
        """Stage each layer's (sorted unique ids, rows) in the next host set; returns it."""
        used, s = self._next, self.sets[self._next]
        self._next = (self._next + 1) % len(self.sets)
        s.fence.synchronize()  # the copies that last read this set have run
        for layer, (ids, rows) in enumerate(parts):
            stage_rows(s, layer, ids, rows)  # into the host set: checked and padded there
            n = ids.numel()
            staged.ids[layer].copy_(s.ids[layer], non_blocking=self.non_blocking)
            staged.rows[layer][:n].copy_(s.rows[layer][:n], non_blocking=self.non_blocking)
        s.fence.record()
        return used
