"""Wider mixed widths at more prompt buckets (issue 29): a recipe may declare them.

The seed prepares each wider mixed width at one balanced prompt bucket. A recipe (or
``--mixed-wide-prompt-buckets``) may add buckets; every addition is a program that
``catalog --check`` counts, and the default stays the seed's 22 + 20 contract.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from ignition.cli import main
from ignition.components.capacity import CapacityError, plan_catalog
from ignition.components.program_kinds import GraphKind
from ignition.recipes import LoadOptions, RecipeError, get_recipe, load_recipe_file
from ignition.recipes.registry import RECIPES_DIR

QWEN = get_recipe("qwen38")


def wider(catalog) -> set[tuple[int, int, int]]:
    """(batch, width, prompt bucket) of every speculative mixed program wider than one."""
    return {
        (d.batch_capacity, d.token_capacity, d.prefill_capacity)
        for d in catalog.of_kind(GraphKind.MIXED)
        if d.speculation_enabled and d.token_capacity > 1
    }


def test_declared_buckets_add_every_wider_width_there_and_nothing_else():
    seed = plan_catalog(QWEN, LoadOptions(mixed_prefill=True))
    wide = plan_catalog(QWEN, LoadOptions(mixed_prefill=True, mixed_wide_prompt_buckets=(2048,)))
    added = wider(wide) - wider(seed)
    assert added == {(b, w, 2048) for b, w, _ in wider(seed)}
    assert wider(seed) <= wider(wide)
    assert len(wide.descriptors) == len(seed.descriptors) + len(added)


def test_the_default_is_the_seeds_contract():
    counts = plan_catalog(QWEN, LoadOptions(mixed_prefill=True)).counts()
    assert (counts["mixed_speculative"], counts["mixed_ordinary"]) == (22, 20)
    assert QWEN.capacity.mixed_wide_prompt_buckets == ()


def test_an_empty_option_overrides_a_recipe_declaration(tmp_path: Path):
    data = yaml.safe_load((RECIPES_DIR / "qwen38" / "recipe.yaml").read_text())
    data["capacity"]["mixed_wide_prompt_buckets"] = [1024, 2048]
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data))
    recipe = load_recipe_file(path)
    assert recipe.capacity.mixed_wide_prompt_buckets == (1024, 2048)
    declared = plan_catalog(recipe, LoadOptions(mixed_prefill=True))
    assert {c for _, _, c in wider(declared)} == {512, 1024, 2048}
    plain = plan_catalog(recipe, LoadOptions(mixed_prefill=True, mixed_wide_prompt_buckets=()))
    assert {c for _, _, c in wider(plain)} == {512}


def test_a_bucket_the_recipe_does_not_prepare_fails_in_one_line():
    with pytest.raises(CapacityError, match=r"--mixed-wide-prompt-buckets = 100: not a prepared"):
        plan_catalog(QWEN, LoadOptions(mixed_prefill=True, mixed_wide_prompt_buckets=(100,)))
    with pytest.raises(CapacityError, match=r"= 4096: not a prepared"):
        options = LoadOptions(
            mixed_prefill=True, max_prefill_chunk=2048, mixed_wide_prompt_buckets=(4096,)
        )
        plan_catalog(QWEN, options)


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ([100], "positive multiple of 64"),
        ([2048, 1024], "strictly increasing"),
        ([320], "not one of capacity.prompt_buckets"),
    ],
)
def test_a_bad_recipe_declaration_names_the_file_key_and_value(tmp_path: Path, value, why):
    data = yaml.safe_load((RECIPES_DIR / "qwen38" / "recipe.yaml").read_text())
    data["capacity"]["mixed_wide_prompt_buckets"] = value
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RecipeError) as info:
        load_recipe_file(path)
    message = str(info.value)
    assert str(path) in message and "capacity.mixed_wide_prompt_buckets" in message
    assert why in message


def test_the_cli_option_reaches_the_catalog_and_check_counts_it():
    runner = CliRunner()
    base = ["catalog", "--recipe", "qwen38", "--mixed-prefill", "--json"]
    seed = runner.invoke(main, base)
    wide = runner.invoke(main, [*base, "--mixed-wide-prompt-buckets", "2048"])
    assert seed.exit_code == 0 and wide.exit_code == 0, wide.output
    seed_counts, wide_counts = json.loads(seed.output)["counts"], json.loads(wide.output)["counts"]
    assert wide_counts["mixed_speculative"] == seed_counts["mixed_speculative"] + 2
    check = runner.invoke(main, ["catalog", "--recipe", "qwen38", "--check"])
    assert check.exit_code == 0, check.output
    assert "mixed_wide_prompt_buckets=[2048]): " in check.output
    assert "mixed_speculative=24" in check.output


def test_load_options_round_trip_through_json():
    options = LoadOptions(mixed_prefill=True, mixed_wide_prompt_buckets=(1024, 2048))
    assert options.to_json()["mixed_wide_prompt_buckets"] == [1024, 2048]
