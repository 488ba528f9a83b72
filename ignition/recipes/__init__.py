"""Declarative per-model recipes: schema, alias lookup, load-time options."""

from __future__ import annotations

from ignition.recipes.options import (
    INDEXER_KV_DTYPES,
    SPECULATION_MODES,
    LoadOptions,
    parse_load_options,
)
from ignition.recipes.registry import RECIPES_DIR, get_recipe, list_recipes
from ignition.recipes.schema import (
    CATALOG_FAMILIES,
    CapacitySpec,
    ExpectedCatalog,
    Recipe,
    RecipeError,
    Supports,
    load_recipe_file,
    parse_recipe,
)

__all__ = [
    "CATALOG_FAMILIES",
    "INDEXER_KV_DTYPES",
    "RECIPES_DIR",
    "SPECULATION_MODES",
    "CapacitySpec",
    "ExpectedCatalog",
    "LoadOptions",
    "Recipe",
    "RecipeError",
    "Supports",
    "get_recipe",
    "list_recipes",
    "load_recipe_file",
    "parse_load_options",
    "parse_recipe",
]
