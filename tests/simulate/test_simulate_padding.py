"""Padding for fairness: baselines at vLLM's CUDA-graph capture sizes, Helios at a step-8
batch grid (issue 12, padding measurement)."""

from __future__ import annotations

import pytest

from ignition.components.program_kinds import GraphKind
from ignition.simulate.baselines import PolicyError, make_baseline, parse_policy
from ignition.simulate.capture import vllm_capture_sizes
from ignition.simulate.devices import Formula, FormulaDevice
from ignition.simulate.engine import run_baseline
from ignition.simulate.workloads import SimRequest

# per-row and per-token terms, so padded rows and padded tokens both show in a duration
DEVICE = FormulaDevice(
    formulas={
        "prefill": Formula(base_ms=2.0, per_token_ms=0.01),
        "speculative": Formula(base_ms=1.0, per_row_ms=0.5, per_token_ms=0.1, per_draft_ms=0.2),
    }
)


def test_vllm_capture_sizes_are_1_2_4_then_multiples_of_8_up_to_twice_the_slots():
    assert vllm_capture_sizes(32, 0, 2048).sizes == (1, 2, 4, *range(8, 65, 8))


def test_with_k_drafts_capture_sizes_are_rounded_up_to_multiples_of_one_plus_k():
    sizes = vllm_capture_sizes(32, 5, 2048).sizes
    assert all(s % 6 == 0 for s in sizes) and sizes[-1] == 32 * 6 * 2
    assert 36 in sizes and 30 not in sizes  # 24 + 8 = 32 rounds up to 36


def test_a_step_above_the_largest_capture_size_runs_eagerly_at_its_own_tokens():
    sizes = vllm_capture_sizes(32, 0, 2048)
    assert sizes.pad(17) == 24
    assert sizes.pad(1500) == 1500


def test_a_padded_step_costs_the_device_model_at_the_padded_row_count():
    # 17 decoders verifying 1 + 3 tokens pack 68 tokens; vLLM's K = 3 sizes at 32 slots
    # hold them in the 72-token graph, 18 rows of 4
    requests = [SimRequest(0.0, 8, 4) for _ in range(17)]
    padded = run_baseline(
        make_baseline("vllm-k3-padded"), requests, DEVICE, slots=32, noise_sigma=0.0
    )
    eager = run_baseline(make_baseline("vllm-k3"), requests, DEVICE, slots=32, noise_sigma=0.0)
    [step] = [e for e in padded.executions if e.kind == "speculative"][:1]
    [eager_step] = [e for e in eager.executions if e.kind == "speculative"][:1]
    assert step.rows == 17 and step.tokens == 68
    assert step.end_ms - step.start_ms == pytest.approx(
        DEVICE.formulas["speculative"].at(18, 72, 3)
    )
    assert eager_step.end_ms - eager_step.start_ms == pytest.approx(
        DEVICE.formulas["speculative"].at(17, 68, 3)
    )


def test_padded_policy_names_keep_family_budget_and_drafts():
    name = parse_policy("vllm-b4096-k3-padded")
    assert (name.family, name.budget, name.drafts, name.padded) == ("vllm", 4096, 3, True)
    assert not parse_policy("vllm-k3").padded


@pytest.mark.parametrize(
    "family", ["prefill-first", "sarathi", "vllm-dyn", "vllm-adaptive", "sglang-tiers"]
)
def test_padding_to_vllm_capture_sizes_is_an_option_of_every_baseline(family):
    assert parse_policy(f"{family}-padded").padded
    assert make_baseline(f"{family}-padded").padded


def test_an_unknown_suffix_is_refused_in_one_line():
    with pytest.raises(PolicyError, match="vllm-padded-k3") as info:
        parse_policy("vllm-padded-k3")
    assert "\n" not in str(info.value)


def test_the_step8_what_if_adds_b24_to_the_power_of_two_catalog_the_recipe_now_declares():
    from ignition.components import capacity
    from ignition.recipes import LoadOptions, get_recipe
    from ignition.simulate.harness import helios_catalog

    stock = helios_catalog("qwen38", 32, 128, pow2_batches=True)
    step8 = helios_catalog("qwen38", 32, 128, step8=True, pow2_batches=True)
    added = {d.name for d in step8.descriptors} - {d.name for d in stock.descriptors}
    extra = [d for d in step8.descriptors if d.name in added]
    assert extra and {d.batch_capacity for d in extra} == {24}
    assert {d.kind for d in extra} == {GraphKind.SPECULATIVE}  # mixed stay powers of two
    # the recipe's 32-slot step declares the same grid (batch_bucket_step 8)
    assert {d.name for d in helios_catalog("qwen38", 32, 128).descriptors} == {
        d.name for d in step8.descriptors
    }
    options = LoadOptions(mixed_prefill=True, concurrency=32, speculative_token_capacity=128)
    recipe = capacity.plan_catalog(get_recipe("qwen38"), options)
    speculative = {d.batch_capacity for d in recipe.descriptors if d.kind is GraphKind.SPECULATIVE}
    assert speculative == {1, 2, 4, 8, 16, 24, 32}


def test_the_padding_table_gives_helios_ratio_against_padded_and_unpadded_best_baselines():
    from pathlib import Path

    from scripts.scheduling_sim.capacity_study import STUDY_SLO, load_results
    from scripts.scheduling_sim.padding import padding_section

    results = load_results(Path(__file__).parents[2] / "docs/capacity/padding.json")
    lines = padding_section(results, (STUDY_SLO,))
    assert lines[0] == "## Padding for fairness (quick mode)"

    def rate(policy: str) -> float:
        r = next(r for r in results if r.job.policy == policy)
        return next(c.rate for c in r.capacities if c.slo == STUDY_SLO)

    fixed = ("vllm", "vllm-k1", "vllm-k3", "vllm-k5")
    eager = max(fixed, key=rate)
    padded = max((p + "-padded" for p in fixed), key=rate)
    row = next(line for line in lines if line.startswith(f"| {STUDY_SLO.label} | `helios` |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3] == f"`{eager}` {rate(eager):.3f}"
    assert cells[4] == f"{rate('helios') / rate(eager):.2f}x"
    assert cells[5] == f"`{padded}` {rate(padded):.3f}"
    assert cells[6] == f"{rate('helios') / rate(padded):.2f}x"
