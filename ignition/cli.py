"""The ``ignition`` command line.

Commands import their rooms lazily so that ``ignition recipes`` or
``ignition catalog`` start without importing torch.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any

import click

from ignition.recipes import SPECULATION_MODES, LoadOptions, RecipeError, get_recipe, list_recipes


class _UserError(click.ClickException):
    """A bad recipe, option or catalog: one line, no traceback, exit status 2."""

    exit_code = 2


def _fail_cleanly(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from ignition.components.capacity import CapacityError
        from ignition.components.catalog import CatalogError

        try:
            return fn(*args, **kwargs)
        except (RecipeError, CapacityError, CatalogError) as err:
            raise _UserError(str(err)) from None

    return wrapper


def capacity_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The load-time options shared by ``catalog`` and ``build``."""
    options = [
        click.option(
            "--recipe",
            "recipe_name",
            required=True,
            help="Recipe name, alias (qwen3.8-flash) or path to a recipe.yaml.",
        ),
        click.option(
            "--mixed-prefill",
            is_flag=True,
            help="Add mixed prompt/decode programs (recipes that declare mixed capture).",
        ),
        click.option("--concurrency", type=int, help="Request slots (at most the recipe's)."),
        click.option(
            "--speculative-token-capacity",
            type=int,
            help="Target-token envelope R for wider speculative programs.",
        ),
        click.option("--num-draft-tokens", type=int, help="MTP draft tokens D (0: ordinary)."),
        click.option(
            "--max-prefill-chunk",
            type=int,
            help="Largest prompt bucket to prepare (one of the recipe's buckets).",
        ),
        click.option(
            "--speculation",
            type=click.Choice(SPECULATION_MODES),
            help="off: none; fixed: host-allocated; adaptive: adds device-allocated.",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def load_options_from(kwargs: dict[str, Any]) -> LoadOptions:
    return LoadOptions(
        mixed_prefill=kwargs["mixed_prefill"],
        concurrency=kwargs["concurrency"],
        speculative_token_capacity=kwargs["speculative_token_capacity"],
        num_draft_tokens=kwargs["num_draft_tokens"],
        max_prefill_chunk=kwargs["max_prefill_chunk"],
        speculation=kwargs["speculation"],
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ignition")
def main() -> None:
    """Ignition: prepare and serve hybrid LLMs from captured graphs."""


@main.command("recipes")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@_fail_cleanly
def recipes_cmd(as_json: bool) -> None:
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


@main.command("catalog")
@capacity_options
@click.option("--json", "as_json", is_flag=True, help="Print the catalog as JSON.")
@click.option(
    "--check",
    is_flag=True,
    help="Compare counts with the recipe's expected_catalogs; exit 1 on a mismatch.",
)
@_fail_cleanly
def catalog_cmd(recipe_name: str, as_json: bool, check: bool, **kwargs: Any) -> None:
    """Enumerate the physical programs a build would prepare."""
    from ignition.components.capacity import plan_catalog
    from ignition.components.catalog_check import check_expected_catalogs

    recipe = get_recipe(recipe_name)
    options = load_options_from(kwargs)
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


if __name__ == "__main__":
    main()
