"""The simulator reads the recipe's finer prompt buckets for serving builds (issue 39,
item 4): ``helios`` at 32 slots runs the qwen38 recipe's 1152 and 1280 buckets, and
``helios+seed-buckets`` is the catalog before them (the before row of the padding study)."""

from __future__ import annotations

from ignition.components.program_kinds import GraphKind
from ignition.simulate.harness import helios_catalog, helios_simulation
from ignition.simulate.results import ExecutionRecord, RunResult
from ignition.simulate.workloads import SimRequest
from scripts.scheduling_sim.realworld import setup_for
from scripts.scheduling_sim.token_padding import padding_of, rebucketed_share, run

FINER = {1152, 1280}


def prompt_buckets(catalog) -> set[int]:
    return {d.prompt_capacity for d in catalog.descriptors if d.kind is GraphKind.PREFILL} | {
        d.prefill_capacity for d in catalog.descriptors if d.kind is GraphKind.MIXED
    }


def test_helios_at_32_slots_runs_the_recipes_finer_buckets():
    assert FINER <= prompt_buckets(helios_catalog("qwen38", 32, 128))
    assert not FINER & prompt_buckets(helios_catalog("qwen38", 32, 128, seed_buckets=True))
    assert not FINER & prompt_buckets(helios_catalog("qwen38", 8, 32))


def test_the_seed_buckets_variant_shapes_the_simulated_catalog():
    setup = setup_for("qwen38-flash-next-h200", 32, 128)
    sim = helios_simulation([SimRequest(0.0, 100, 4)], setup, "helios+seed-buckets")
    assert not FINER & prompt_buckets(sim.scenario.catalog)


def test_prompts_of_1025_to_1280_tokens_leave_less_padding_with_the_finer_buckets():
    """On the MoE H200 profile such a prompt ran in the 1536 bucket (the conversation
    trace's padding); now in 1152 or 1280, for less device time."""
    setup = setup_for("qwen38-flash-next-h200", 32, 128)
    requests = [SimRequest(300.0 * i, 1100 + 40 * i, 4) for i in range(4)]
    _, before = run("helios+seed-buckets", requests, setup)
    _, after = run("helios", requests, setup)
    assert after.prompt_padding < before.prompt_padding
    assert after.busy_ms < before.busy_ms


def test_the_offline_estimate_puts_each_prompt_frame_in_the_smallest_bucket_holding_it():
    catalog = helios_catalog("qwen38", 8, 32)
    prefill = {d.token_capacity: d for d in catalog.descriptors if d.kind is GraphKind.PREFILL}
    runs = [
        ExecutionRecord(0.0, 1.0, "prefill", prefill[1536].name, rows=1, tokens=1100,
                        prompt_tokens=1100),
        ExecutionRecord(1.0, 2.0, "prefill", prefill[512].name, rows=1, tokens=500,
                        prompt_tokens=500),
    ]
    result = RunResult("helios", [], runs, 2.0)
    pad = padding_of(result, {d.name: d for d in catalog.descriptors})
    assert pad.share == (436 + 12) / 2048
    assert rebucketed_share(result, pad, sorted(prefill), ()) == pad.share
    assert rebucketed_share(result, pad, sorted(prefill), (1152,)) == (52 + 12) / (1152 + 512)
