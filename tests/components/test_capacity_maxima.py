"""Issue 12 item 6: recipes declare defaults and maxima; builds may raise capacity up to
the maxima, while the catalog check stays stated for the defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ignition.components.capacity import CapacityError, plan_catalog, resolve
from ignition.recipes import LoadOptions, get_recipe
from ignition.recipes.schema import RecipeError, load_recipe_file

QWEN = get_recipe("qwen38")


def _recipe_with(tmp_path: Path, maxima: dict | None):
    data = yaml.safe_load(QWEN.path.read_text())
    data["capacity"].pop("maxima", None)
    data["capacity"].pop("concurrency_defaults", None)  # steps live within the maxima
    if maxima is not None:
        data["capacity"]["maxima"] = maxima
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_qwen38_declares_concurrency_4_and_r_6_as_defaults_with_larger_maxima():
    cap = QWEN.capacity
    assert (cap.concurrency, cap.speculative_token_capacity) == (4, 6)
    assert cap.max_concurrency == 64 and cap.max_speculative_token_capacity > 6


def test_build_options_may_raise_concurrency_and_r_up_to_the_maxima():
    cap = resolve(QWEN, LoadOptions(concurrency=32, speculative_token_capacity=128))
    assert (cap.concurrency, cap.speculative_token_capacity) == (32, 128)
    catalog = plan_catalog(
        QWEN, LoadOptions(mixed_prefill=True, concurrency=32, speculative_token_capacity=128)
    )
    assert max(d.batch_capacity for d in catalog.descriptors) == 32
    assert (
        max(d.packed_capacity for d in catalog.descriptors if d.kind.value == "speculative") == 128
    )


def test_defaults_are_unchanged_when_no_option_is_given():
    cap = resolve(QWEN, LoadOptions())
    assert (cap.concurrency, cap.speculative_token_capacity) == (4, 6)
    assert plan_catalog(QWEN, LoadOptions(mixed_prefill=True)).counts()["mixed_speculative"] == 22


def test_a_recipe_without_maxima_allows_only_its_defaults(tmp_path):
    recipe = load_recipe_file(_recipe_with(tmp_path, None))
    with pytest.raises(CapacityError, match="--concurrency = 8: exceeds what the recipe prepares"):
        resolve(recipe, LoadOptions(concurrency=8))


def test_maxima_below_the_defaults_are_rejected_naming_the_key(tmp_path):
    with pytest.raises(RecipeError, match=r"capacity\.maxima\.concurrency' = 2: below the default"):
        load_recipe_file(_recipe_with(tmp_path, {"concurrency": 2}))


def test_maxima_with_an_unknown_key_are_rejected(tmp_path):
    with pytest.raises(RecipeError, match=r"capacity\.maxima\.slots"):
        load_recipe_file(_recipe_with(tmp_path, {"slots": 8}))
