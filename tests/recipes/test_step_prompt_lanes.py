"""Prompt lanes for serving builds (issue 39): ``capacity.concurrency_defaults[i].prompt_lanes``.

A build of at least a step's slots declares that step's {bucket: L} lanes, merged over
``capacity.prompt_lanes`` (later steps over earlier ones); the load option prompt_lanes
still overrides. Smaller builds keep the declared lanes, so the seed's 22 + 20 contract at
concurrency four holds. qwen38 declares {512: 4, 1024: 4, 2048: 2, 4096: 2} from 32 slots
(docs/capacity.md, "Prompt lanes for serving builds").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ignition.components.capacity import plan_catalog, resolve
from ignition.components.program_kinds import GraphKind
from ignition.recipes import LoadOptions, RecipeError, get_recipe, load_recipe_file
from tests.recipe_steps import qwen38_with_steps

QWEN = get_recipe("qwen38")
RECOMMENDED = ((512, 4), (1024, 4), (2048, 2), (4096, 2))


def recipe_with(tmp_path: Path, steps, lanes=None) -> Path:
    extra = {} if lanes is None else {"prompt_lanes": lanes}
    return qwen38_with_steps(tmp_path, steps, **extra)


def laned(catalog) -> set[tuple[str, int, int]]:
    return {
        (d.kind.name, d.prompt_capacity, d.prompt_lanes)
        for d in catalog.descriptors
        if d.kind in (GraphKind.PREFILL, GraphKind.MIXED) and d.prompt_lanes > 1
    }


@pytest.mark.parametrize("slots", [32, 48, 64])
def test_qwen38_serving_builds_carry_the_recommended_lanes(slots):
    cap = resolve(QWEN, LoadOptions(mixed_prefill=True, concurrency=slots))
    assert cap.prompt_lanes == RECOMMENDED
    prefill = {
        (d.token_capacity, d.prompt_lanes)
        for d in plan_catalog(QWEN, LoadOptions(concurrency=slots)).of_kind(GraphKind.PREFILL)
        if d.prompt_lanes > 1
    }
    assert prefill == set(RECOMMENDED)


@pytest.mark.parametrize("slots", [None, 4, 16, 31])
def test_smaller_builds_keep_one_lane(slots):
    catalog = plan_catalog(QWEN, LoadOptions(mixed_prefill=True, concurrency=slots))
    assert not laned(catalog)
    if slots is None:
        counts = catalog.counts()
        assert (counts["prefill"], counts["mixed_speculative"], counts["mixed_ordinary"]) == (
            10,
            22,
            20,
        )


def test_the_load_option_still_overrides_the_step_lanes():
    assert resolve(QWEN, LoadOptions(concurrency=32, prompt_lanes=())).prompt_lanes == ()
    chosen = resolve(QWEN, LoadOptions(concurrency=32, prompt_lanes=((1024, 2),)))
    assert chosen.prompt_lanes == ((1024, 2),)


def test_step_lanes_merge_over_the_declared_ones_and_later_steps_over_earlier(tmp_path):
    steps = [
        {"concurrency": 16, "speculative_token_capacity": 64, "prompt_lanes": {1024: 4}},
        {"concurrency": 32, "speculative_token_capacity": 128, "more_prompt_buckets": [1280]},
        {"concurrency": 64, "speculative_token_capacity": 192, "prompt_lanes": {1024: 2}},
    ]
    recipe = load_recipe_file(recipe_with(tmp_path, steps, lanes={512: 2}))
    assert recipe.capacity.prompt_lanes_for(4) == ((512, 2),)
    assert recipe.capacity.prompt_lanes_for(16) == ((512, 2), (1024, 4))
    assert recipe.capacity.prompt_lanes_for(64) == ((512, 2), (1024, 2))


def test_a_step_may_lane_a_bucket_its_build_prepares(tmp_path):
    steps = [
        {
            "concurrency": 32,
            "speculative_token_capacity": 128,
            "more_prompt_buckets": [1280],
            "prompt_lanes": {1280: 2},
        }
    ]
    recipe = load_recipe_file(recipe_with(tmp_path, steps))
    assert resolve(recipe, LoadOptions(concurrency=32)).prompt_lanes == ((1280, 2),)


@pytest.mark.parametrize(
    ("lanes", "key", "why"),
    [
        ({1100: 2}, "prompt_lanes.1100", "not one of the prompt buckets of a 32-slot build"),
        ({1280: 2}, "prompt_lanes.1280", "not one of the prompt buckets of a 32-slot build"),
        ({1024: 0}, "prompt_lanes.1024", "must lie in 1..capacity.concurrency_defaults[0]"),
        ({1024: 64}, "prompt_lanes.1024", "= 32"),
        ({768: 5}, "prompt_lanes.768", "must split the bucket 768 evenly"),
        ({1024: "4"}, "prompt_lanes.1024", "expected int"),
        ([1024, 4], "prompt_lanes", "expected dict"),
    ],
)
def test_a_bad_step_lane_table_names_the_file_key_and_value(tmp_path, lanes, key, why):
    step = {"concurrency": 32, "speculative_token_capacity": 128, "prompt_lanes": lanes}
    path = recipe_with(tmp_path, [step])
    with pytest.raises(RecipeError) as info:
        load_recipe_file(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    assert f"capacity.concurrency_defaults[0].{key}" in message and why in message


def test_qwen38_counts_its_laned_serving_builds():
    stated = {
        (e.options.concurrency, e.options.prompt_lanes): e.counts for e in QWEN.expected_catalogs
    }
    assert stated[(32, None)]["prefill"] == 16
    assert stated[(64, None)]["mixed_speculative"] == 190  # 141 + the wide bucket 1024
    assert stated[(32, ())]["prefill"] == 12
    for entry in QWEN.expected_catalogs:
        got = plan_catalog(QWEN, entry.options).counts()
        assert all(got[family] == n for family, n in entry.counts.items()), entry.options
