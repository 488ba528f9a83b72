"""``serve PATH``: the bundle to serve, building a checkpoint into the build cache once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ignition.cli import progress
from ignition.cli.errors import UserError
from ignition.cli.ple_options import ple_description
from ignition.cli.runtime_options import RuntimeArgs


def serve_artifacts(
    path: Path | None,
    runtime: RuntimeArgs,
    ple: Any,
    *,
    cache_dir: Path | None = None,
    max_num_seqs: int | None = None,
) -> tuple[str, int | None]:
    """The bundle to serve for PATH or ``--artifacts`` (a checkpoint is built into the
    cache first) and the request slots to ask of it (None: the bundle's); ``serve`` and
    ``debug-serve`` alike."""
    from ignition.serving.serve_path import (
        CheckpointBuild,
        ServePathError,
        build_options,
        built_bundle,
        choose_path,
        classify,
    )

    try:
        chosen = choose_path(path, runtime.artifacts)
        kind = classify(chosen)
    except ServePathError as err:
        raise UserError(str(err)) from None
    if kind == "bundle":
        return str(chosen), max_num_seqs
    tensor_parallel = runtime.placement.tensor_parallel_size
    if tensor_parallel > 1 and _under_torchrun():
        raise UserError(
            f"{chosen}: a checkpoint under torchrun: every process would build it into the "
            f"cache; build it first (`ignition build --weights {chosen} -tp "
            f"{tensor_parallel}`) and serve the bundle, or serve the checkpoint without "
            "torchrun (the ranks are spawned)"
        )
    from ignition.compiler.build_cache import CacheError, default_cache_root

    fit = build_options(
        chosen,
        max_num_seqs=max_num_seqs,
        speculation=runtime.speculation,
        mixed=runtime.mixed,
        indexer_kv_dtype=runtime.indexer_kv_dtype,
    )
    if fit.note is not None:
        click.echo(f"note: {fit.note}", err=True)
    device = runtime.placement.device
    build = CheckpointBuild(
        chosen,
        fit.options,
        device,
        runtime.placement.threads,
        ple_description(ple, chosen, device),
        tensor_parallel_size=tensor_parallel,
    )

    def run_build(build: CheckpointBuild, folder: Path) -> None:
        result = progress.build_with_progress(
            None,
            build.options,
            weights=build.checkpoint,
            out_dir=folder,
            device=build.device,
            threads=build.threads,
            ple=build.ple,
            tensor_parallel_size=build.tensor_parallel_size,
        )
        for note in result.notes:
            click.echo(f"note: {note}", err=True)

    def say(line: str) -> None:
        click.echo(line, err=True)

    try:
        bundle = built_bundle(build, cache_dir or default_cache_root(), run_build, say)
    except CacheError as err:
        raise UserError(str(err)) from None
    return str(bundle), None


def _under_torchrun() -> bool:
    from ignition.distributed.launch import torchrun_env

    return torchrun_env() is not None


def existing_bundle(artifacts: str) -> None:
    """``generate --artifacts``: a bundle, named as ``serve`` names a bad PATH (checked
    after every other flag, before anything loads)."""
    from ignition.serving.serve_path import ServePathError, classify

    try:
        kind = classify(Path(artifacts))
    except ServePathError as err:
        raise UserError(str(err)) from None
    if kind != "bundle":
        raise UserError(
            f"--artifacts {artifacts}: a checkpoint folder, not a bundle; build it first "
            f"(`ignition build --weights {artifacts}`) or serve it (`ignition serve {artifacts}`)"
        )
