"""``ignition catalog``: the physical programs a build would prepare, or ``--check``
against the recipe's expected counts."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ignition.cli.recipe_options import RecipeArgs, capacity_options
from ignition.cli.registry import Command
from ignition.recipes import LoadOptions, get_recipe


def run(as_json: bool, check: bool, **params: Any) -> None:
    """Enumerate the physical programs a build would prepare."""
    from ignition.components.capacity import plan_catalog
    from ignition.components.catalog_check import check_expected_catalogs

    selection = RecipeArgs.from_params(params)
    recipe = get_recipe(selection.recipe_name)
    options = selection.load
    if check:
        explicit = options if options != LoadOptions() else None
        failures, lines = check_expected_catalogs(recipe, explicit)
        for line in lines:
            click.echo(line)
        if failures:
            for failure in failures:
                click.echo(failure, err=True)
            sys.exit(1)
        return
    catalog = plan_catalog(recipe, options)
    if as_json:
        data = catalog.to_json()
        data = {
            "recipe": data["recipe"],
            "options": data["options"],
            "counts": data["counts"],
            "descriptors": data["descriptors"],
        }
        click.echo(json.dumps(data, indent=2))
        return
    from ignition.components.catalog_report import print_catalog_tables

    print_catalog_tables(recipe, catalog)


COMMAND = Command(
    name="catalog",
    options=(
        *capacity_options(),
        click.option("--json", "as_json", is_flag=True, help="Print the catalog as JSON."),
        click.option(
            "--check",
            is_flag=True,
            help="Compare counts with the recipe's expected_catalogs; exit 1 on a mismatch.",
        ),
    ),
    run=run,
)
