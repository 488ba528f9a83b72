"""Issue 11: the Qwen3.5 recipes answer to their aliases, and every shipped recipe names a
model family the registry implements, so each one can be built."""

from __future__ import annotations

import pytest

from ignition.model.families import get_family
from ignition.recipes import get_recipe, list_recipes


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("qwen3.5", "qwen35"),
        ("qwen3.6", "qwen35"),
        ("qwen3.5-0.8b", "qwen35"),
        ("qwen3.5-moe", "qwen35-moe"),
        ("qwen3.6-35b-a3b", "qwen35-moe"),
        ("llama3.2-1b", "llama32"),
    ],
)
def test_aliases_name_the_qwen35_and_llama_recipes(alias, name):
    assert get_recipe(alias).name == name


def test_every_recipe_names_an_implemented_family_whose_default_recipe_it_is():
    for recipe in list_recipes():
        family = get_family(recipe.family)
        assert family is not None, recipe.name
        assert get_recipe(family.recipe).name == recipe.name  # by name or alias


def test_qwen35_recipes_prepare_drafts_and_mixed_programs():
    for name in ("qwen35", "qwen35-moe"):
        recipe = get_recipe(name)
        assert recipe.supports.speculation and recipe.supports.mixed_capture
        assert recipe.capacity.num_draft_tokens == 3 and recipe.capacity.speculation == "adaptive"
