"""``ignition debug-serve --direct``: serve with the diagnostic scheduler of
``ignition/direct`` (decode-round selection only)."""

from __future__ import annotations

from typing import Any

import click

from ignition.cli.registry import Command
from ignition.cli.runtime_options import RuntimeArgs, runtime_options
from ignition.cli.serve_common import serve, serve_options
from ignition.cli.server_options import ServerArgs, server_options


def run(direct: bool, **params: Any) -> None:
    """Serve with the diagnostic scheduler of ignition/direct (decode-round selection only)."""
    runtime = RuntimeArgs.from_params(params)
    server = ServerArgs.from_params(params)
    options = serve_options(runtime, **server.serve_fields())
    serve(options, server.host, server.port, direct=direct, placement=runtime.placement)


COMMAND = Command(
    name="debug-serve",
    options=(
        *runtime_options(),
        *server_options(),
        click.option(
            "--direct",
            is_flag=True,
            required=True,
            help="Use the diagnostic direct scheduler (required: the only debug mode).",
        ),
    ),
    run=run,
)
