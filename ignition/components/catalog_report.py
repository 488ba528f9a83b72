"""Human-readable catalog tables for ``ignition catalog``."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ignition.components.catalog import FAMILIES, Catalog, family_of
from ignition.recipes import Recipe


def print_catalog_tables(recipe: Recipe, catalog: Catalog, console: Console | None = None) -> None:
    """A summary table (count and capture headroom per family), then one table per family."""
    console = console or Console(width=max(Console().width, 120))
    options = ", ".join(f"{k}={v}" for k, v in catalog.options.items()) or "defaults"
    summary = Table(title=f"{recipe.name} catalog ({options})")
    summary.add_column("family")
    summary.add_column("programs", justify="right")
    summary.add_column("largest packed extent", justify="right")
    by_family = {f: [d for d in catalog.descriptors if family_of(d) == f] for f in FAMILIES}
    for family, items in by_family.items():
        extent = max((d.max_packed_extent for d in items), default=0)
        summary.add_row(family, str(len(items)), str(extent) if items else "-")
    summary.add_row(
        "total", str(len(catalog.descriptors)), str(catalog.max_packed_extent()), style="bold"
    )
    console.print(summary)
    for family, items in by_family.items():
        if not items:
            continue
        table = Table(title=family)
        for column in ("program", "B", "D", "W", "P", "prompt", "value source", "packed extent"):
            table.add_column(
                column, justify="left" if column in ("program", "value source") else "right"
            )
        for d in items:
            table.add_row(
                d.name,
                str(d.batch_capacity),
                str(d.proposal_depth),
                str(d.token_capacity),
                str(d.packed_capacity),
                str(d.prefill_capacity or "-"),
                d.value_source.value,
                str(d.max_packed_extent),
            )
        console.print(table)
