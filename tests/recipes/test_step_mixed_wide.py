"""Issue 40: ``capacity.concurrency_defaults[i].mixed_wide_prompt_buckets``: builds of at
least that many slots prepare every wider mixed width also at those prompt buckets (qwen38:
1024 from 8 slots), so a 1,024-token chunk's frame can carry its decoders at width two; the
seed's default of 4 slots keeps its 22 + 20 contract."""

from __future__ import annotations


import pytest

from ignition.components.capacity import plan_catalog, resolve
from ignition.components.program_kinds import GraphKind
from ignition.recipes import LoadOptions, RecipeError, get_recipe, load_recipe_file
from tests.recipe_steps import qwen38_with_steps

QWEN = get_recipe("qwen38")


def wide_buckets(slots: int | None, options: dict | None = None) -> set[int]:
    options = LoadOptions(mixed_prefill=True, concurrency=slots, **(options or {}))
    catalog = plan_catalog(QWEN, options)
    return {
        d.prefill_capacity
        for d in catalog.descriptors
        if d.kind is GraphKind.MIXED and d.token_capacity > 1
    }


def test_qwen38_prepares_wide_mixed_programs_at_1024_from_eight_slots():
    assert wide_buckets(None) == {512}  # the seed's balanced bucket only
    assert wide_buckets(8) == {512, 1024}
    assert wide_buckets(32) == {512, 1024}
    assert resolve(QWEN, LoadOptions(concurrency=8)).speculative_token_capacity == 32
    counts = plan_catalog(QWEN, LoadOptions(mixed_prefill=True)).counts()
    assert (counts["mixed_speculative"], counts["mixed_ordinary"]) == (22, 20)


def test_the_load_option_still_overrides_the_steps():
    assert wide_buckets(32, {"mixed_wide_prompt_buckets": ()}) == {512}
    assert wide_buckets(32, {"mixed_wide_prompt_buckets": (2048,)}) == {512, 2048}


def test_a_step_bucket_the_build_does_not_prepare_is_one_line(tmp_path):
    step = {"concurrency": 8, "speculative_token_capacity": 32, "mixed_wide_prompt_buckets": [1152]}
    where = r"concurrency_defaults\[0\]\.mixed_wide_prompt_buckets\[0\]"
    with pytest.raises(RecipeError, match=where):
        load_recipe_file(qwen38_with_steps(tmp_path, [step]))


def test_a_step_may_name_its_own_more_prompt_buckets(tmp_path):
    steps = [
        {
            "concurrency": 32,
            "speculative_token_capacity": 128,
            "more_prompt_buckets": [1152],
            "mixed_wide_prompt_buckets": [1152],
        }
    ]
    recipe = load_recipe_file(qwen38_with_steps(tmp_path, steps))
    assert resolve(recipe, LoadOptions(concurrency=32)).mixed_wide_prompt_buckets == (1152,)
    assert resolve(recipe, LoadOptions(concurrency=16)).mixed_wide_prompt_buckets == ()
