"""``ignition serve``: the OpenAI-compatible API with the Helios scheduler."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ignition.cli.ple_options import ple_from_params, ple_options
from ignition.cli.registry import Command
from ignition.cli.runtime_options import RuntimeArgs, runtime_options
from ignition.cli.scheduler_options import SchedulerArgs, scheduler_options
from ignition.cli.serve_artifacts import serve_artifacts
from ignition.cli.serve_common import listen_first, serve, serve_options
from ignition.cli.serve_path_options import ServePathArgs, serve_path_options
from ignition.cli.serve_replicas import ReplicaArgs, replica_options, serve_replicas
from ignition.cli.server_options import ServerArgs, server_options


def run(**params: Any) -> None:
    """Serve the OpenAI-compatible API with the Helios scheduler.

    PATH is a checkpoint folder (built once into the build cache, then served) or a bundle
    written by `ignition build`; `--artifacts BUNDLE` still works.
    """
    runtime = RuntimeArgs.from_params(params)
    server = ServerArgs.from_params(params)
    path_args = ServePathArgs.from_params(params)
    scheduler = SchedulerArgs.from_params(params)
    ple = ple_from_params(params)
    replicas = ReplicaArgs.from_params(params)
    replicas.check(runtime.placement.tensor_parallel_size)
    scheduler = scheduler.with_prefix_caching(path_args.enable_prefix_caching)
    policy_fields = scheduler.serve_fields()  # the preset and its overrides, before any load
    listen_first(server)
    artifacts, num_slots = serve_artifacts(
        path_args.path,
        runtime,
        ple,
        cache_dir=path_args.cache_dir,
        max_num_seqs=path_args.max_num_seqs,
    )
    runtime = replace(runtime, artifacts=artifacts)
    options = serve_options(
        runtime,
        ple=ple,
        max_num_seqs=num_slots,
        chat_template=path_args.chat_template,
        metrics_names=path_args.metrics_names,
        **policy_fields,
        **server.serve_fields(),
    )
    if replicas.is_replicated:
        from ignition.compiler.device import resolve_device

        device = resolve_device(runtime.placement.device)
        serve_replicas(options, replicas, server.host, server.port, device)
        return
    serve(options, server.host, server.port, direct=False, placement=runtime.placement)


COMMAND = Command(
    name="serve",
    options=(
        *runtime_options(artifacts_required=False),
        *server_options(),
        *serve_path_options(),
        *scheduler_options(),
        *ple_options(),
        *replica_options(),
    ),
    run=run,
)
