"""Recipe defaults of R by slot count (issue 29): ``capacity.concurrency_defaults``.

A build of 32 or 64 slots that does not choose ``--speculative-token-capacity`` gets
the R the recipe states for that many slots (measured in docs/capacity.md), not the
concurrency-4 default that keeps the seed's 22 + 20 contract.
"""

from __future__ import annotations


import pytest

from ignition.components.capacity import resolve
from ignition.recipes import LoadOptions, RecipeError, get_recipe, load_recipe_file
from tests.recipe_steps import qwen38_with_steps


STEPS = [
    {"concurrency": 32, "speculative_token_capacity": 128},
    {"concurrency": 64, "speculative_token_capacity": 192},
]


@pytest.mark.parametrize(
    ("slots", "envelope"), [(None, 6), (8, 6), (31, 6), (32, 128), (48, 128), (64, 192)]
)
def test_a_build_without_r_gets_the_step_for_its_slots(tmp_path, slots, envelope):
    recipe = load_recipe_file(qwen38_with_steps(tmp_path, STEPS))
    assert resolve(recipe, LoadOptions(concurrency=slots)).speculative_token_capacity == envelope


def test_an_explicit_r_wins_over_the_step(tmp_path):
    recipe = load_recipe_file(qwen38_with_steps(tmp_path, STEPS))
    options = LoadOptions(concurrency=64, speculative_token_capacity=96)
    assert resolve(recipe, options).speculative_token_capacity == 96


def test_the_default_catalog_keeps_the_seed_contract():
    counts = get_recipe("qwen38")
    from ignition.components.capacity import plan_catalog

    planned = plan_catalog(counts, LoadOptions(mixed_prefill=True)).counts()
    assert (planned["mixed_speculative"], planned["mixed_ordinary"]) == (22, 20)


def test_qwen38_states_r_for_32_and_64_slots():
    cap = get_recipe("qwen38").capacity
    assert [slots for slots, _ in cap.concurrency_defaults] == [8, 32, 64]
    for slots, envelope in cap.concurrency_defaults:
        assert (
            resolve(get_recipe("qwen38"), LoadOptions(concurrency=slots)).speculative_token_capacity
            == envelope
        )


@pytest.mark.parametrize(
    ("steps", "where", "why"),
    [
        ([{"concurrency": 4, "speculative_token_capacity": 8}], "[0].concurrency", "must exceed 4"),
        ([{"concurrency": 128, "speculative_token_capacity": 8}], "[0].concurrency", "at most"),
        (
            [{"concurrency": 32, "speculative_token_capacity": 4}],
            "speculative_token_capacity",
            "at least 6",
        ),
        (
            [{"concurrency": 32, "speculative_token_capacity": 999}],
            "speculative_token_capacity",
            "at most",
        ),
        ([{"concurrency": 32}], "speculative_token_capacity", "required key is missing"),
        ([{"concurrency": 32, "speculative_token_capacity": 64, "x": 1}], "[0].x", "unknown key"),
    ],
)
def test_a_bad_step_names_the_file_key_and_value(tmp_path, steps, where, why):
    path = qwen38_with_steps(tmp_path, steps)
    with pytest.raises(RecipeError) as info:
        load_recipe_file(path)
    message = str(info.value)
    assert str(path) in message and "capacity.concurrency_defaults" in message
    assert where in message and why in message
