"""Start a tensor-parallel group (torchrun's processes, or ranks spawned here); a watchdog
ends rank zero when a rank died unnoticed (docs/scaling.md)."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ignition.compiler.device import resolve_device
from ignition.distributed.context import (
    FRAME_TIMEOUT_S,
    TensorParallel,
    TensorParallelError,
    tensor_parallel_group,
)
from ignition.distributed.ranks import Stop

T = TypeVar("T")
RankZero = Callable[[Any, TensorParallel], T]  # (options, tp) -> rank zero's result
Follower = Callable[[Any, TensorParallel], None]
# Seconds the spawned ranks get to return after rank zero has stopped them.
JOIN_TIMEOUT_S = 60.0
# Seconds rank zero gets to stop by itself once a spawned rank has died.
WATCHDOG_GRACE_S = 20.0


def rank_device(requested: str | None, local_rank: int) -> torch.device:
    """The device of a rank: cuda:LOCAL_RANK when the job runs on CUDA, else the request."""
    device = resolve_device(requested)
    if device.type != "cuda":
        return device
    if device.index not in (None, 0) or local_rank >= torch.cuda.device_count():
        raise TensorParallelError(
            f"rank {local_rank} needs cuda:{local_rank}; {torch.cuda.device_count()} visible "
            "devices (each rank takes one: --device cuda, not cuda:N)"
        )
    return torch.device("cuda", local_rank)


def torchrun_env() -> tuple[int, int, int] | None:
    """(rank, world size, local rank) when torchrun started this process."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return None
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    return rank, world, int(os.environ.get("LOCAL_RANK", rank))


def run_tensor_parallel(
    world_size: int,
    options,
    rank_zero: RankZero,
    *,
    debug: bool = False,
    frame_timeout_s: float = FRAME_TIMEOUT_S,
    follower: Follower | None = None,
) -> T | None:
    """Run ``rank_zero(options, tp)`` on rank zero and ``follower(options, tp)`` elsewhere;
    returns rank zero's result (None on other torchrun ranks). ``follower`` must be importable
    by reference; without one, ``options.follow`` is used."""
    follower = follower or _options_follower(options)
    if world_size < 2:
        raise TensorParallelError(f"--tensor-parallel-size {world_size}: use at least 2 ranks")
    env = torchrun_env()
    if env is not None:
        rank, world, local = env
        if world != world_size:
            raise TensorParallelError(
                f"--tensor-parallel-size {world_size} but torchrun started {world} processes"
            )
        role = rank_zero if rank == 0 else follower
        return _run_rank(rank, world, local, options, role, debug, frame_timeout_s)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(_free_port())
    context = mp.start_processes(
        _follower_main,
        args=(world_size, options, follower, debug, frame_timeout_s, os.getpid()),
        nprocs=world_size - 1,
        join=False,
        start_method="spawn",
    )
    stopped = threading.Event()
    watchdog = threading.Thread(target=_watch, args=(context, stopped), daemon=True)
    watchdog.start()
    try:
        result = _run_rank(0, world_size, 0, options, rank_zero, debug, frame_timeout_s)
    except BaseException:
        stopped.set()
        for process in context.processes:
            process.terminate()
        raise
    stopped.set()
    watchdog.join()
    _join_followers(context)
    return result


def _options_follower(options) -> Follower:
    """The role the options' own class gives ranks 1..N-1 (its ``follow`` method)."""
    follow = getattr(type(options), "follow", None)
    if not callable(follow):
        raise TensorParallelError(
            f"{type(options).__name__} names no role for ranks 1..N-1: pass follower=, or "
            "give the options a follow(tp) method"
        )
    return follow


def _run_rank(
    rank: int,
    world_size: int,
    local_rank: int,
    options,
    role: Callable,
    debug: bool,
    frame_timeout_s: float,
):
    """``role(options, tp)`` as rank ``rank``; rank zero then stops the followers' loops."""
    device = rank_device(options.device, local_rank)
    options = replace(options, device=str(device))
    with tensor_parallel_group(
        rank, world_size, device, debug=debug, frame_timeout_s=frame_timeout_s
    ) as tp:
        result = role(options, tp)
        if rank == 0 and tp.health.broken is None:
            stop_followers(tp)
        return result if rank == 0 else None


def stop_followers(tp: TensorParallel) -> None:
    """Tell the other ranks' engine loops to return (rank zero, once its own has stopped)."""
    dist.broadcast_object_list([Stop()], src=0, group=tp.control_group)


def _follower_main(
    index: int,
    world_size: int,
    options,
    follower: Follower,
    debug: bool,
    timeout_s: float,
    parent: int,
) -> None:
    rank = index + 1
    threading.Thread(target=_exit_with, args=(parent,), daemon=True).start()
    _run_rank(rank, world_size, rank, options, follower, debug, timeout_s)


def _exit_with(parent: int) -> None:
    """A spawned rank ends when rank zero's process is gone."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def _join_followers(context) -> None:
    """Join the spawned ranks; print a failed one's traceback, terminate stragglers."""
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    try:
        while not context.join(timeout=0.5) and time.monotonic() < deadline:
            pass
    except Exception as err:
        print(f"error: a tensor-parallel rank failed: {err}", file=sys.stderr, flush=True)
    for process in context.processes:
        if process.is_alive():
            process.terminate()


def _watch(context, stopped: threading.Event) -> None:
    """End rank zero after a grace period when a spawned rank died before it was stopped."""
    while not stopped.is_set():
        try:
            if context.join(timeout=0.5):
                return  # every rank returned
        except Exception as err:  # a rank raised or was killed: its traceback is in err
            print(f"error: a tensor-parallel rank failed: {err}", file=sys.stderr, flush=True)
            if stopped.wait(WATCHDOG_GRACE_S):
                return
            print("error: rank zero did not stop; exiting", file=sys.stderr, flush=True)
            os._exit(1)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
