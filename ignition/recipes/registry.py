"""Find recipes shipped with the package and resolve names and aliases."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from ignition.recipes.schema import Recipe, RecipeError, load_recipe_file

RECIPES_DIR = Path(__file__).resolve().parent


@cache
def _discover(root: Path) -> dict[str, Recipe]:
    """Map every name and alias under ``root`` to its recipe; a name claimed twice is an error."""
    index: dict[str, Recipe] = {}
    for path in sorted(root.glob("*/recipe.yaml")):
        recipe = load_recipe_file(path)
        if recipe.name != path.parent.name:
            raise RecipeError(
                f"{path}: key 'name' = {recipe.name!r}: must match its folder {path.parent.name!r}"
            )
        for key in (recipe.name, *recipe.aliases):
            if key in index:
                raise RecipeError(
                    f"{path}: key 'aliases' = {key!r}: already names recipe {index[key].name!r} "
                    f"({index[key].path})"
                )
            index[key] = recipe
    return index


def list_recipes(root: Path = RECIPES_DIR) -> list[Recipe]:
    """Every recipe once, in name order."""
    unique = {r.name: r for r in _discover(root).values()}
    return [unique[name] for name in sorted(unique)]


def get_recipe(name: str, root: Path = RECIPES_DIR) -> Recipe:
    """Resolve a recipe name, an alias (``qwen3.8-flash``) or a path to a recipe.yaml."""
    candidate = Path(name)
    if candidate.suffix in (".yaml", ".yml") or candidate.is_dir():
        path = candidate / "recipe.yaml" if candidate.is_dir() else candidate
        return load_recipe_file(path)
    index = _discover(root)
    if name not in index:
        known = ", ".join(sorted(index))
        raise RecipeError(f"recipe {name!r}: unknown recipe or alias (known: {known})")
    return index[name]
