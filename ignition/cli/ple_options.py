"""Where the PLE n-gram table lives (``build`` and ``serve``; docs/ple.md). Models without
a table accept the flags and report "no PLE table"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ignition.cli.errors import UserError
from ignition.cli.registry import Decorator


def ple_options() -> list[Decorator]:
    return [
        click.option(
            "--ple-residency",
            metavar="device|host|disk",
            help="Where the PLE n-gram table lives (default: from its size and the memory).",
        ),
        click.option(
            "--ple-preload/--no-ple-preload",
            default=None,
            help="Host residency: copy the table into pinned memory at load (serve: default "
            "the bundle's).",
        ),
        click.option(
            "--ple-cache-bytes",
            metavar="BYTES",
            help="Disk residency: the row cache's bound, e.g. 4GiB (build: default 1GiB; "
            "serve: default the bundle's).",
        ),
    ]


def ple_from_params(params: dict[str, Any]) -> Any:
    """Take (pop) the PLE flags and build the (frozen, validated) PleOptions; a flag not
    given stays None, so that serve takes the built bundle's value (``PleOptions.over``)."""
    from ignition.runtime.ple.delivery import PleOptions, parse_bytes

    residency = params.pop("ple_residency")
    preload = params.pop("ple_preload")
    cache_bytes = params.pop("ple_cache_bytes")
    try:
        return PleOptions(
            residency, preload, None if cache_bytes is None else parse_bytes(cache_bytes)
        )
    except ValueError as err:
        raise UserError(str(err)) from None


def ple_description(options: Any, weights: Path | None, device: str | None) -> dict[str, Any]:
    """The build report's PLE entry: the checkpoint's table and where it will live."""
    from ignition.compiler.build import DEFAULT_CHECKPOINT
    from ignition.compiler.device import resolve_device
    from ignition.runtime.ple.delivery import describe_table
    from ignition.runtime.ple.store import choose_residency
    from ignition.runtime.ple.table import PleTableError, find_layout

    try:
        layout = find_layout(weights or DEFAULT_CHECKPOINT)
    except PleTableError as err:
        raise UserError(str(err)) from None
    if layout is None:
        return describe_table(options, None)
    residency = options.residency or choose_residency(layout.table_bytes, resolve_device(device))
    return describe_table(options, layout, residency)
