"""``ignition debug-serve --direct``: serve with the diagnostic scheduler of
``ignition/direct`` (decode-round selection only)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from ignition.cli.registry import Command
from ignition.cli.runtime_options import RuntimeArgs, runtime_options
from ignition.cli.serve_artifacts import serve_artifacts
from ignition.cli.serve_common import listen_first, serve, serve_options
from ignition.cli.serve_path_options import cache_dir_option, path_argument
from ignition.cli.server_options import ServerArgs, server_options


def run(direct: bool, path: Path | None, cache_dir: Path | None, **params: Any) -> None:
    """Serve with the diagnostic scheduler of ignition/direct (decode-round selection only).

    PATH is a bundle or a checkpoint folder, as for `ignition serve`.
    """
    from ignition.runtime.ple.delivery import PleOptions

    runtime = RuntimeArgs.from_params(params)
    server = ServerArgs.from_params(params)
    listen_first(server)
    artifacts, _slots = serve_artifacts(path, runtime, PleOptions(), cache_dir=cache_dir)
    runtime = replace(runtime, artifacts=artifacts)
    options = serve_options(runtime, **server.serve_fields())
    serve(options, server.host, server.port, direct=direct, placement=runtime.placement)


COMMAND = Command(
    name="debug-serve",
    options=(
        *runtime_options(artifacts_required=False),
        *server_options(),
        path_argument(),
        cache_dir_option(),
        click.option(
            "--direct",
            is_flag=True,
            required=True,
            help="Use the diagnostic direct scheduler (required: the only debug mode).",
        ),
    ),
    run=run,
)
