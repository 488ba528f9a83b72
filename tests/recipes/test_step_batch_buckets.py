"""``capacity.concurrency_defaults[i].batch_bucket_step``: builds of at least that many slots
prepare decode and speculative programs on a step grid (qwen38: vLLM's capture sizes, 1, 2,
4 and every multiple of 8, from 32 slots), so 40 decoders run a 40-row program instead of
a 64-row one; mixed programs keep powers of two and the seed's 4-slot catalog is unchanged."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ignition.cli import main
from ignition.components.batch_buckets import generation_buckets
from ignition.components.capacity import CapacityError, plan_catalog, resolve
from ignition.components.program_kinds import GraphKind
from ignition.recipes import LoadOptions, RecipeError, get_recipe, load_recipe_file
from ignition.recipes.options import parse_load_options
from tests.recipe_steps import qwen38_with_steps

QWEN = get_recipe("qwen38")
GENERATION = (GraphKind.DECODE, GraphKind.SPECULATIVE)


def batches(slots: int | None, kinds, **options) -> set[int]:
    opts = LoadOptions(mixed_prefill=True, concurrency=slots, **options)
    return {d.batch_capacity for d in plan_catalog(QWEN, opts).descriptors if d.kind in kinds}


def test_the_grid_is_vllms_capture_sizes_through_the_padded_concurrency():
    assert generation_buckets(64, 8) == [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]
    assert generation_buckets(32, 8) == [1, 2, 4, 8, 16, 24, 32]
    assert generation_buckets(4, 8) == [1, 2, 4]
    assert generation_buckets(64, 0) == [1, 2, 4, 8, 16, 32, 64]
    with pytest.raises(ValueError, match="batch bucket step 6"):
        generation_buckets(64, 6)


def test_qwen38_steps_its_generation_batches_from_32_slots_and_keeps_mixed_powers_of_two():
    assert batches(64, GENERATION) == {1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64}
    assert batches(32, GENERATION) == {1, 2, 4, 8, 16, 24, 32}
    assert batches(16, GENERATION) == {1, 2, 4, 8, 16}  # below the step: powers of two
    assert batches(64, (GraphKind.MIXED,)) == {2, 4, 8, 16, 32, 64}
    counts = plan_catalog(QWEN, LoadOptions(mixed_prefill=True)).counts()
    assert (counts["decode"], counts["speculative"]) == (3, 12)  # the seed's contract


def test_every_stepped_speculative_program_keeps_the_envelope():
    cap = resolve(QWEN, LoadOptions(concurrency=64))
    for d in plan_catalog(QWEN, LoadOptions(concurrency=64)).descriptors:
        if d.kind is GraphKind.SPECULATIVE and d.batch_capacity in (24, 40, 48, 56):
            assert d.packed_capacity <= cap.speculative_token_capacity


def test_the_load_option_selects_the_seeds_powers_of_two_or_another_step():
    assert batches(64, GENERATION, batch_bucket_step=0) == {1, 2, 4, 8, 16, 32, 64}
    assert batches(32, GENERATION, batch_bucket_step=16) == {1, 2, 4, 8, 16, 32}
    with pytest.raises(CapacityError, match="option batch_bucket_step = 12"):
        resolve(QWEN, LoadOptions(concurrency=64, batch_bucket_step=12))
    with pytest.raises(ValueError, match=r"'options.batch_bucket_step' = 3"):
        parse_load_options({"batch_bucket_step": 3}, "options")


def test_a_bad_step_is_one_line_naming_the_key(tmp_path):
    step = {"concurrency": 32, "speculative_token_capacity": 128, "batch_bucket_step": 12}
    where = r"concurrency_defaults\[0\]\.batch_bucket_step"
    with pytest.raises(RecipeError, match=where):
        load_recipe_file(qwen38_with_steps(tmp_path, [step]))
    step["batch_bucket_step"] = True
    with pytest.raises(RecipeError, match=where):
        load_recipe_file(qwen38_with_steps(tmp_path, [step]))


def test_the_cli_flag_reaches_the_catalog_and_the_check_counts_the_seeds_grid():
    runner = CliRunner()
    base = ["catalog", "--recipe", "qwen38", "--concurrency", "64", "--json"]
    stepped = json.loads(runner.invoke(main, base).output)["counts"]
    seed = runner.invoke(main, [*base, "--batch-bucket-step", "0"])
    assert seed.exit_code == 0, seed.output
    assert json.loads(seed.output)["counts"]["decode"] == stepped["decode"] - 4  # 24 .. 56
    check = runner.invoke(main, ["catalog", "--recipe", "qwen38", "--check"])
    assert check.exit_code == 0, check.output
    assert "batch_bucket_step=0): prefill=16 decode=7 speculative=40" in check.output
    assert LoadOptions(batch_bucket_step=0).to_json() == {"batch_bucket_step": 0}
