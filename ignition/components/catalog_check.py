"""The CI catalog-size check: planned counts against each recipe's declaration.

A recipe states how many programs each family must have for given load
options. A change to the capacity rules that silently adds or drops programs
changes build time, memory and what Helios can select, so CI fails until the
recipe's numbers are updated on purpose.
"""

from __future__ import annotations

from ignition.components.capacity import plan_catalog
from ignition.recipes import CATALOG_FAMILIES, LoadOptions, Recipe, RecipeError


def describe_options(options: LoadOptions) -> str:
    shown = options.to_json()
    return ", ".join(f"{k}={v}" for k, v in shown.items()) or "defaults"


def check_expected_catalogs(
    recipe: Recipe, options: LoadOptions | None = None
) -> tuple[list[str], list[str]]:
    """Check every declared expectation, or only the one matching ``options``.

    Returns (failures, report lines). A failure names the recipe, the options,
    the family and both numbers.
    """
    expectations = recipe.expected_catalogs
    if options is not None:
        expectations = tuple(e for e in expectations if e.options == options)
        if not expectations:
            raise RecipeError(
                f"{recipe.path}: key 'expected_catalogs' declares no counts for options "
                f"({describe_options(options)}); add an entry or check without options"
            )
    if not expectations:
        raise RecipeError(f"{recipe.path}: key 'expected_catalogs' is empty: nothing to check")
    failures: list[str] = []
    lines: list[str] = []
    for expected in expectations:
        counts = plan_catalog(recipe, expected.options).counts()
        label = f"{recipe.name} ({describe_options(expected.options)})"
        bad = [
            f"{label}: family {family}: recipe {recipe.path} expects {expected.counts[family]}, "
            f"the capacity rules give {counts[family]}"
            for family in CATALOG_FAMILIES
            if family in expected.counts and expected.counts[family] != counts[family]
        ]
        failures += bad
        summary = " ".join(f"{f}={counts[f]}" for f in CATALOG_FAMILIES)
        lines.append(f"{'FAIL' if bad else 'ok'}   {label}: {summary}")
    return failures, lines
