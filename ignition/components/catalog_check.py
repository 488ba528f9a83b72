"""The CI catalog-size check: the programs per family the capacity rules plan against the
counts each recipe declares, so a rule change that adds or drops programs fails CI."""

from __future__ import annotations

from ignition.components.capacity import plan_catalog
from ignition.recipes import CATALOG_FAMILIES, LoadOptions, Recipe, RecipeError


def describe_options(options: LoadOptions) -> str:
    shown = options.to_json()
    return ", ".join(f"{k}={v}" for k, v in shown.items()) or "defaults"


def check_expected_catalogs(
    recipe: Recipe, options: LoadOptions | None = None
) -> tuple[list[str], list[str]]:
    """(failures, report lines) for every declared expectation, or only the one matching
    ``options``; a failure names the recipe, the options, the family and both numbers."""
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
