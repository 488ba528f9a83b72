"""``ignition recipes``: the recipes, their aliases and what each supports."""

from __future__ import annotations

import json

import click

from ignition.cli.registry import Command
from ignition.recipes import list_recipes


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
            r.supports_summary(),
            str(r.capacity.concurrency),
            f"{len(r.capacity.prompt_buckets)} (<= {r.capacity.max_prefill_chunk})",
        )
    Console(width=max(Console().width, 120)).print(table)


COMMAND = Command(
    name="recipes",
    options=(click.option("--json", "as_json", is_flag=True, help="Machine-readable output."),),
    run=run,
)
