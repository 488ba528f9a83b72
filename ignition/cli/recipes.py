"""``ignition recipes``: the recipes, their aliases and what each supports."""

from __future__ import annotations

import json

import click

from ignition.cli.registry import Command
from ignition.recipes import Recipe, list_recipes


def supports(recipe: Recipe) -> str:
    """What the recipe supports, with what its vision support prepares: the patch
    capacities of its vision programs, or none (a checkpoint's tower then encodes images
    eagerly, unprepared)."""
    summary = recipe.supports_summary()
    if not recipe.supports.vision:
        return summary
    patches = recipe.capacity.vision_patch_capacities
    detail = (
        f"vision programs of {', '.join(map(str, patches))} patches"
        if patches
        else "no vision programs: images on the eager tower"
    )
    return summary.replace("vision", f"vision ({detail})")


def run(as_json: bool) -> None:
    """List recipes, their aliases and what each supports."""
    recipes = list_recipes()
    if as_json:
        rows = [
            {
                "name": r.name,
                "aliases": list(r.aliases),
                "family": r.family,
                "description": r.description,
                "supports": {
                    "mixed_capture": r.supports.mixed_capture,
                    "speculation": r.supports.speculation,
                    "vision": r.supports.vision,
                },
                "vision_patch_capacities": list(r.capacity.vision_patch_capacities),
                "path": str(r.path),
            }
            for r in recipes
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Ignition recipes")
    for column in ("name", "aliases", "family", "supports", "concurrency", "prompt buckets"):
        table.add_column(column)
    for r in recipes:
        table.add_row(
            r.name,
            ", ".join(r.aliases),
            r.family,
            supports(r),
            str(r.capacity.concurrency),
            f"{len(r.capacity.prompt_buckets)} (<= {r.capacity.max_prefill_chunk})",
        )
    Console(width=max(Console().width, 120)).print(table)


COMMAND = Command(
    name="recipes",
    options=(click.option("--json", "as_json", is_flag=True, help="Machine-readable output."),),
    run=run,
)
