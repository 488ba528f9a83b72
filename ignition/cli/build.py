"""``ignition build``: prepare and validate every program of a recipe; write the bundle."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from ignition.cli import progress
from ignition.cli.device_options import (
    DeviceArgs,
    device_option,
    tensor_parallel_options,
    threads_option,
)
from ignition.cli.ple_options import ple_description, ple_from_params, ple_options
from ignition.cli.recipe_options import RecipeArgs, capacity_options
from ignition.cli.registry import Command
from ignition.cli.runtime_options import indexer_kv_dtype_option


def run(weights: Path | None, out_dir: Path | None, copy_weights: bool, **params: Any) -> None:
    """Prepare and validate every program of a recipe; write the bundle."""
    from ignition.compiler.build import DEFAULT_CHECKPOINT, resolve_recipe
    from ignition.compiler.context_fit import fit_checkpoint_build

    placement = DeviceArgs.from_params(params)
    ple = ple_description(ple_from_params(params), weights, placement.device)
    selection = RecipeArgs.from_params(params)
    load = replace(selection.load, indexer_kv_dtype=params.pop("indexer_kv_dtype"))
    # a recipe that does not match the checkpoint fails before any progress bar
    checkpoint = weights or DEFAULT_CHECKPOINT
    recipe = resolve_recipe(selection.recipe_name, checkpoint)
    fit = fit_checkpoint_build(recipe, load, checkpoint)  # prompt buckets the model holds
    if fit.note is not None:
        click.echo(f"note: {fit.note}")
    load = fit.options
    result = progress.build_with_progress(
        selection.recipe_name,
        load,
        weights=weights,
        out_dir=out_dir,
        copy_weights=copy_weights,
        device=placement.device,
        threads=placement.threads,
        tensor_parallel_size=placement.tensor_parallel_size,
        ple=ple,
    )
    if result is None:  # a non-zero torchrun rank: rank zero reports
        return
    for note in result.notes:
        click.echo(f"note: {note}")
    counts = " ".join(f"{k}={v}" for k, v in result.catalog.counts().items())
    click.echo(
        f"built {result.out_dir}: {len(result.catalog.descriptors)} programs ({counts}), "
        f"{result.num_reused} reused; report: {result.out_dir / 'build_report.md'}"
    )


COMMAND = Command(
    name="build",
    options=(
        *capacity_options(
            recipe_help="Recipe name, alias or path; default: the recipe registered for the "
            "checkpoint's config.json model_type."
        ),
        click.option(
            "--weights",
            type=click.Path(file_okay=False, path_type=Path),
            help="Checkpoint folder (HF layout); default: the embedded tiny checkpoint.",
        ),
        click.option(
            "--out",
            "out_dir",
            type=click.Path(file_okay=False, path_type=Path),
            help="Output folder; default: artifacts/<recipe>.",
        ),
        click.option("--copy-weights", is_flag=True, help="Copy the weights into the bundle."),
        device_option(),
        threads_option("default on CPU: 1"),
        tensor_parallel_options()[0],
        *ple_options(),
        indexer_kv_dtype_option("default: auto; serve may choose another"),
    ),
    run=run,
)
