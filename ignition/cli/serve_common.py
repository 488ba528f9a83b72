"""The glue ``generate``, ``serve`` and ``debug-serve`` share: ServeOptions from the
option groups, rank zero of tensor-parallel ranks, and serving until the engine stops."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from ignition.cli.checks import check_port_free
from ignition.cli.device_options import DeviceArgs
from ignition.cli.progress import LoadProgress
from ignition.cli.runtime_options import RuntimeArgs
from ignition.cli.server_options import ServerArgs


def serve_options(runtime: RuntimeArgs, **extra: Any) -> Any:
    """ServeOptions from the shared runtime options plus command-specific fields."""
    from ignition.serving.engine import ServeOptions

    return ServeOptions(
        artifacts=runtime.artifacts,
        speculation=runtime.speculation,
        mixed=runtime.mixed,
        max_context_tokens=runtime.max_context,
        device=runtime.placement.device,
        num_threads=runtime.placement.threads,
        verify_weights=runtime.verify_weights,
        indexer_kv_dtype=runtime.indexer_kv_dtype,
        **extra,
    )


def listen_first(server: ServerArgs) -> None:
    """The address is free before any build or load (only the process that will listen
    checks: under torchrun, rank zero)."""
    from ignition.distributed.launch import torchrun_env

    ranks = torchrun_env()
    if ranks is None or ranks[0] == 0:
        check_port_free(server.host, server.port)


def with_ranks(placement: DeviceArgs, options: Any, rank_zero: Callable[..., Any]) -> Any:
    """``rank_zero(options, tp)`` on rank zero of --tensor-parallel-size ranks, or
    ``rank_zero(options, None)`` on one rank."""
    size = placement.tensor_parallel_size
    if size == 1:
        return rank_zero(options, None)
    from ignition.distributed.launch import run_tensor_parallel

    return run_tensor_parallel(size, options, rank_zero, debug=placement.tensor_parallel_debug)


def serve(options: Any, host: str, port: int, direct: bool, placement: DeviceArgs) -> None:
    """Load with progress, announce the address, and exit 1 if the engine failed."""
    from ignition.serving.forever import serve_forever

    def listening(url: str) -> None:
        progress.close()
        click.echo(f"listening on {url}")

    with LoadProgress() as progress:

        def run(options: Any, tp: Any) -> str | None:
            listener = progress.listener
            return serve_forever(
                options, host, port, direct, listener=listener, on_listening=listening, tp=tp
            )

        failure = with_ranks(placement, options, run)
    if failure is not None:
        click.echo(f"error: {failure}; every open request was ended; exiting", err=True)
        sys.exit(1)
