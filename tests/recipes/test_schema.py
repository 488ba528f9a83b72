"""Recipe schema: typed parsing, alias lookup and one-line errors naming file, key, value."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ignition.recipes import (
    LoadOptions,
    RecipeError,
    get_recipe,
    list_recipes,
    load_recipe_file,
)
from ignition.recipes.registry import RECIPES_DIR

QWEN_PATH = RECIPES_DIR / "qwen38" / "recipe.yaml"


def qwen_data() -> dict:
    return yaml.safe_load(QWEN_PATH.read_text())


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def expect_error(tmp_path: Path, data: dict, *fragments: str) -> str:
    path = write(tmp_path, data)
    with pytest.raises(RecipeError) as info:
        load_recipe_file(path)
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message
    return message


def test_qwen38_declares_the_issue_capacities():
    recipe = get_recipe("qwen38")
    cap = recipe.capacity
    assert recipe.family == "qwen4_exp"  # Qwen3.8-Flash-Next as released
    assert recipe.supports.mixed_capture
    assert cap.concurrency == 4
    assert cap.max_prefill_chunk == 4096
    assert cap.prompt_buckets == (64, 128, 256, 512, 768, 1024, 1536, 2048, 3072, 4096)
    assert cap.num_draft_tokens == 5
    assert cap.completion_token_capacity == 8
    assert cap.speculative_token_capacity == 6
    assert cap.kv_page_size > 0


def test_alias_resolves_to_the_same_recipe():
    assert get_recipe("qwen3.8-flash") is get_recipe("qwen38")


def test_recipe_can_be_named_by_path():
    assert get_recipe(str(QWEN_PATH)).name == "qwen38"


def test_unknown_alias_names_the_alias_and_known_recipes():
    with pytest.raises(RecipeError, match=r"'qwen9'.*unknown recipe or alias.*qwen3\.8-flash"):
        get_recipe("qwen9")


def test_a_second_family_without_mixed_capture_ships():
    families = {r.family for r in list_recipes()}
    assert len(families) >= 2
    dense = get_recipe("llama32")
    assert not dense.supports.mixed_capture
    assert not dense.supports.speculation


def test_parsed_recipe_is_frozen():
    recipe = get_recipe("qwen38")
    with pytest.raises(AttributeError):
        recipe.capacity.concurrency = 8  # type: ignore[misc]


def test_unknown_key_is_rejected(tmp_path):
    data = qwen_data()
    data["capacity"]["concurency"] = 4
    expect_error(tmp_path, data, "'capacity.concurency'", "unknown key")


def test_unknown_top_level_key_is_rejected(tmp_path):
    data = qwen_data()
    data["flavour"] = "spicy"
    expect_error(tmp_path, data, "'flavour'", "'spicy'", "unknown key")


def test_wrong_type_is_rejected(tmp_path):
    data = qwen_data()
    data["capacity"]["concurrency"] = "four"
    expect_error(tmp_path, data, "'capacity.concurrency'", "'four'", "expected int")


def test_boolean_is_not_an_integer(tmp_path):
    data = qwen_data()
    data["capacity"]["num_draft_tokens"] = True
    expect_error(tmp_path, data, "'capacity.num_draft_tokens'", "expected int")


@pytest.mark.parametrize("bucket", [100, 0, -64])
def test_bucket_must_be_a_positive_multiple_of_64(tmp_path, bucket):
    data = qwen_data()
    data["capacity"]["prompt_buckets"][3] = bucket
    expect_error(tmp_path, data, "'capacity.prompt_buckets[3]'", str(bucket), "multiple of 64")


def test_buckets_must_increase(tmp_path):
    data = qwen_data()
    data["capacity"]["prompt_buckets"] = [128, 64]
    data["capacity"]["max_prefill_chunk"] = 64
    expect_error(tmp_path, data, "'capacity.prompt_buckets'", "strictly increasing")


def test_chunk_must_be_the_largest_bucket(tmp_path):
    data = qwen_data()
    data["capacity"]["max_prefill_chunk"] = 8192
    expect_error(tmp_path, data, "'capacity.max_prefill_chunk'", "8192", "largest prompt bucket")


def test_missing_required_key_is_named(tmp_path):
    data = qwen_data()
    del data["capacity"]["concurrency"]
    expect_error(tmp_path, data, "'capacity.concurrency'", "missing")


def test_mixed_capture_asked_of_a_recipe_that_does_not_declare_it(tmp_path):
    data = qwen_data()
    data["supports"]["mixed_capture"] = False
    expect_error(tmp_path, data, "'expected_catalogs[0].options.mixed_prefill'", "mixed capture")


def test_unknown_option_in_expected_catalog(tmp_path):
    data = qwen_data()
    data["expected_catalogs"][0]["options"]["turbo"] = True
    expect_error(tmp_path, data, "'expected_catalogs[0].options.turbo'", "unknown option")


def test_unknown_family_in_expected_counts(tmp_path):
    data = qwen_data()
    data["expected_catalogs"][0]["counts"]["audio"] = 1
    expect_error(tmp_path, data, "'expected_catalogs[0].counts.audio'", "unknown family")


def test_draft_tokens_need_speculation_support(tmp_path):
    data = qwen_data()
    data["supports"]["speculation"] = False
    expect_error(tmp_path, data, "'capacity.num_draft_tokens'", "5")


def test_invalid_yaml_is_one_line(tmp_path):
    path = tmp_path / "recipe.yaml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(RecipeError) as info:
        load_recipe_file(path)
    assert "not valid YAML" in str(info.value)
    assert "\n" not in str(info.value)


def test_expected_catalog_options_parse_to_load_options():
    first = get_recipe("qwen38").expected_catalogs[0]
    assert first.options == LoadOptions(mixed_prefill=True)
    assert first.counts["mixed_speculative"] == 22
