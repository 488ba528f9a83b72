"""Finer prompt buckets for serving builds (issue 39, item 4):
``capacity.concurrency_defaults[i].more_prompt_buckets``.

A build of at least a step's slots also prepares that step's prompt buckets (prefill and
every mixed program, as any prompt bucket); smaller builds keep the declared buckets, so
the seed's 22 + 20 contract at concurrency four holds. qwen38 declares 1152 and 1280 from
32 slots (docs/capacity.md, "Finer prompt buckets for serving builds").
"""

from __future__ import annotations


import pytest

from ignition.components.capacity import CapacityError, plan_catalog, resolve
from ignition.components.program_kinds import GraphKind
from ignition.recipes import LoadOptions, RecipeError, get_recipe, load_recipe_file
from tests.recipe_steps import qwen38_with_steps

QWEN = get_recipe("qwen38")
SEED = (64, 128, 256, 512, 768, 1024, 1536, 2048, 3072, 4096)


def prompt_buckets(catalog, kind: GraphKind, batch: int = 0) -> set[int]:
    if kind is GraphKind.PREFILL:
        return {d.token_capacity for d in catalog.of_kind(kind)}
    return {d.prefill_capacity for d in catalog.of_kind(kind) if d.batch_capacity == batch}


@pytest.mark.parametrize("slots", [32, 48, 64])
def test_qwen38_serving_builds_prepare_1152_and_1280_everywhere_a_bucket_goes(slots):
    catalog = plan_catalog(QWEN, LoadOptions(mixed_prefill=True, concurrency=slots))
    assert prompt_buckets(catalog, GraphKind.PREFILL) == {*SEED, 1152, 1280}
    for batch in {d.batch_capacity for d in catalog.of_kind(GraphKind.MIXED)}:
        width_one = [
            d
            for d in catalog.of_kind(GraphKind.MIXED)
            if d.batch_capacity == batch and d.token_capacity == 1
        ]
        for speculative in (True, False):
            got = {d.prefill_capacity for d in width_one if d.speculation_enabled == speculative}
            assert got == {*SEED, 1152, 1280}


@pytest.mark.parametrize("slots", [None, 4, 16, 31])
def test_smaller_builds_keep_the_declared_buckets(slots):
    catalog = plan_catalog(QWEN, LoadOptions(mixed_prefill=True, concurrency=slots))
    assert prompt_buckets(catalog, GraphKind.PREFILL) == set(SEED)
    if slots is None:
        counts = catalog.counts()
        assert (counts["mixed_speculative"], counts["mixed_ordinary"]) == (22, 20)


def test_the_wider_widths_keep_the_balanced_bucket():
    catalog = plan_catalog(QWEN, LoadOptions(mixed_prefill=True, concurrency=32))
    wider = [d for d in catalog.of_kind(GraphKind.MIXED) if d.token_capacity > 1]
    # the added buckets carry width one only; 1024 is the 8-slot step's wide bucket
    assert wider and {d.prefill_capacity for d in wider} == {512, 1024}


def test_a_step_bucket_is_a_chunk_limit_only_for_builds_that_prepare_it():
    cap = resolve(QWEN, LoadOptions(concurrency=32, max_prefill_chunk=1280))
    assert cap.prompt_buckets == (64, 128, 256, 512, 768, 1024, 1152, 1280)
    with pytest.raises(CapacityError, match=r"--max-prefill-chunk = 1280: not a prepared"):
        resolve(QWEN, LoadOptions(concurrency=8, max_prefill_chunk=1280))


def test_later_steps_add_to_earlier_ones(tmp_path):
    steps = [
        {"concurrency": 16, "speculative_token_capacity": 64, "more_prompt_buckets": [1280]},
        {"concurrency": 32, "speculative_token_capacity": 128},
        {"concurrency": 64, "speculative_token_capacity": 192, "more_prompt_buckets": [640]},
    ]
    recipe = load_recipe_file(qwen38_with_steps(tmp_path, steps))
    assert recipe.capacity.prompt_buckets_for(8) == SEED
    assert recipe.capacity.prompt_buckets_for(32) == tuple(sorted({*SEED, 1280}))
    assert recipe.capacity.prompt_buckets_for(64) == tuple(sorted({*SEED, 640, 1280}))


@pytest.mark.parametrize(
    ("more", "where", "why"),
    [
        ([1100], "more_prompt_buckets[0]", "multiple of 64"),
        ([1280, 1152], "more_prompt_buckets", "strictly increasing"),
        ([1024], "more_prompt_buckets[0]", "already a prompt bucket"),
        ([4096], "more_prompt_buckets[0]", "already a prompt bucket"),
        ([4160], "more_prompt_buckets[0]", "below the largest prompt bucket 4096"),
        ([], "more_prompt_buckets", "must not be empty"),
        (1152, "more_prompt_buckets", "expected list"),
    ],
)
def test_a_bad_bucket_list_names_the_file_key_and_value(tmp_path, more, where, why):
    step = {"concurrency": 32, "speculative_token_capacity": 128, "more_prompt_buckets": more}
    path = qwen38_with_steps(tmp_path, [step])
    with pytest.raises(RecipeError) as info:
        load_recipe_file(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    assert f"capacity.concurrency_defaults[0].{where}" in message and why in message


def test_a_bucket_declared_by_an_earlier_step_is_named(tmp_path):
    steps = [
        {"concurrency": 32, "speculative_token_capacity": 128, "more_prompt_buckets": [1152]},
        {"concurrency": 64, "speculative_token_capacity": 192, "more_prompt_buckets": [1152]},
    ]
    with pytest.raises(RecipeError, match=r"concurrency_defaults\[1\]\.more_prompt_buckets\[0\]"):
        load_recipe_file(qwen38_with_steps(tmp_path, steps))


def test_qwen38_counts_its_serving_builds():
    stated = {e.options.concurrency for e in QWEN.expected_catalogs}
    assert {32, 64} <= stated
