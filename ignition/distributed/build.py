"""``ignition build --tensor-parallel-size N``: every rank prepares and validates its shard
(collectives included); rank zero writes the bundle, whose fingerprint includes the size."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ignition.distributed.context import TensorParallel
from ignition.distributed.follower import await_stop
from ignition.distributed.loading import load_sharded_checkpoint
from ignition.recipes import LoadOptions


@dataclass(frozen=True)
class BuildJob:
    """The build's arguments, as every rank receives them (picklable for spawned ranks)."""

    recipe_name: str | None
    options: LoadOptions
    weights: Path | None
    out_dir: Path | None
    copy_weights: bool
    device: str | None
    threads: int | None


def build_on_rank(job: BuildJob, tp: TensorParallel, **callbacks: Any):
    """Run the build pipeline as rank ``tp.rank``; rank zero's result (and callbacks) only."""
    from ignition.compiler.build import build_bundle

    result = build_bundle(
        job.recipe_name,
        job.options,
        weights=job.weights,
        out_dir=job.out_dir,
        copy_weights=job.copy_weights,
        device=job.device,
        threads=job.threads,
        load=lambda path, device: load_sharded_checkpoint(path, tp, device),
        write=tp.is_rank_zero,
        tensor_parallel_size=tp.world_size,
        **(callbacks if tp.is_rank_zero else {}),
    )
    return result if tp.is_rank_zero else None


def follow_build(job: BuildJob, tp: TensorParallel) -> None:
    """A non-zero rank's side of a tensor-parallel build."""
    build_on_rank(job, tp)
    await_stop(tp)
