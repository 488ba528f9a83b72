"""The tensor-parallel context: rank, groups and collectives. ``group`` carries the model's
device collectives; ``cpu_group`` (gloo) the plans and reports; ``control_group`` idle waits."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

# A frame's host collectives (agreement, reports) fail after this long.
FRAME_TIMEOUT_S = 120.0
# Generous: the first collectives wait for the slowest rank's load and compilation.
DEVICE_TIMEOUT_S = 600.0
# A follower waits this long for rank zero's next message (an idle server sends none).
IDLE_TIMEOUT_S = 7 * 24 * 3600.0


class TensorParallelError(ValueError):
    """A tensor-parallel setup that cannot run (sizes, devices, launch)."""


@dataclass
class GroupHealth:
    """Set once a rank failed inside an agreed program: the group is out of step."""

    broken: str | None = None


@dataclass(frozen=True)
class TensorParallel:
    """One rank's view of the tensor-parallel group."""

    rank: int
    world_size: int
    group: Any = None  # device collectives; None only for a single rank
    cpu_group: Any = None  # host objects during a frame
    control_group: Any = None  # host objects between frames
    debug: bool = False  # compare emitted tokens and committed state across ranks each frame
    health: GroupHealth = field(default_factory=GroupHealth, compare=False)

    @property
    def is_rank_zero(self) -> bool:
        return self.rank == 0

    def chunk(self, size: int) -> tuple[int, int]:
        """This rank's [start, stop) of ``size`` items split evenly (``size`` divisible)."""
        if size % self.world_size:
            raise TensorParallelError(f"{size} does not split into {self.world_size} ranks")
        width = size // self.world_size
        return self.rank * width, (self.rank + 1) * width

    def padded_chunk(self, size: int) -> tuple[int, int, int]:
        """(start, stop, width): ceil(size / world) rows per rank, the last ones padded."""
        width = -(-size // self.world_size)
        start = min(size, self.rank * width)
        return start, min(size, start + width), width

    def all_reduce(self, tensor: Tensor) -> Tensor:
        """Sum ``tensor`` over the ranks in place (the row-parallel layers' output)."""
        dist.all_reduce(tensor, group=self.group)
        return tensor

    def all_gather_last(self, tensor: Tensor) -> Tensor:
        """[..., n] per rank -> [..., world * n], rank order along the last dimension."""
        flat = tensor.contiguous().view(-1)  # both backends take the flat 1-D form
        gathered = flat.new_empty(self.world_size * flat.numel())
        _all_gather_single(gathered, flat, group=self.group)
        stacked = gathered.view(self.world_size, *tensor.shape)  # [world, ..., n]
        return stacked.movedim(0, -2).reshape(*tensor.shape[:-1], -1)


# torch 2.13 renamed all_gather_into_tensor (deprecated there); older torch has only that.
_all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


def backend_for(device: torch.device) -> str:
    return "nccl" if device.type == "cuda" else "gloo"


@contextmanager
def tensor_parallel_group(
    rank: int,
    world_size: int,
    device: torch.device,
    *,
    debug: bool = False,
    frame_timeout_s: float = FRAME_TIMEOUT_S,
) -> Iterator[TensorParallel]:
    """Join the process group (env:// rendezvous) for the block's duration."""
    if device.type == "cuda":
        torch.cuda.set_device(device)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group(
        backend_for(device),
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=DEVICE_TIMEOUT_S),
        device_id=device if device.type == "cuda" else None,
    )
    tp = None
    try:
        cpu_group = dist.new_group(backend="gloo", timeout=timedelta(seconds=frame_timeout_s))
        control_group = dist.new_group(backend="gloo", timeout=timedelta(seconds=IDLE_TIMEOUT_S))
        tp = TensorParallel(rank, world_size, dist.group.WORLD, cpu_group, control_group, debug)
        yield tp
    finally:
        # Tearing down a broken group can block, and the process is exiting anyway.
        if tp is None or tp.health.broken is None:
            dist.destroy_process_group()
