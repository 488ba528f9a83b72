"""Issue 39 in the simulator: Helios's catalog variants with several prompt lanes (or
with the one-lane programs only), multi-lane frames timed and completed like any other,
and the padding measurement reading the programs the runs used."""

from __future__ import annotations

from ignition.simulate.harness import RECOMMENDED_LANES, helios_catalog, run_policy
from ignition.simulate.results import ExecutionRecord, RunResult
from scripts.scheduling_sim.realworld import random_workload, setup_for
from scripts.scheduling_sim.token_padding import padding_of


def test_lane_variants_shape_the_recipes_catalog():
    lanes = helios_catalog("qwen38", 8, 32, lanes=4)
    assert any(d.prompt_lanes == 4 for d in lanes.descriptors)
    assert any(d.prompt_lanes == 1 for d in lanes.descriptors)  # one lane stays everywhere
    one = helios_catalog("qwen38", 8, 32, lanes=1)
    assert all(d.prompt_lanes == 1 for d in one.descriptors)
    upto = helios_catalog("qwen38", 8, 32, lanes=4, lanes_upto=1024)
    assert {d.prompt_capacity for d in upto.descriptors if d.prompt_lanes > 1} <= {
        64, 128, 256, 512, 768, 1024
    }
    rec = helios_catalog("qwen38", 8, 32, lane_option=RECOMMENDED_LANES)
    assert {(d.prompt_capacity, d.prompt_lanes) for d in rec.descriptors if d.prompt_lanes > 1} >= {
        (512, 4), (1024, 4), (2048, 2), (4096, 2)
    }
    grid = helios_catalog("qwen38", 8, 32, grid=256)
    assert 1280 in {d.prefill_capacity for d in grid.descriptors}


def test_a_wave_of_prompts_shares_frames_and_every_request_finishes():
    """The dense profile gathers no PLE rows, so a closed loop's first wave is ready at
    once: with four lanes its prompts share frames; every request still finishes."""
    setup = setup_for("qwen38-27b-dense-h200", 8, 32)
    requests = [r.__class__(r.arrival_ms, 256, 8, r.acceptance) for r in random_workload(8)[:8]]
    run = run_policy("helios+lanes4", requests, setup)
    assert run.finished == len(requests)
    assert any(e.prompt_tokens and e.rows - e.decoders > 1 for e in run.executions)
    one = run_policy("helios+l1", requests, setup)
    assert all(e.rows - e.decoders <= 1 for e in one.executions if e.prompt_tokens)


def test_padding_counts_the_bucket_and_the_rows_a_frame_left_empty():
    catalog = helios_catalog("qwen38", 8, 32, lanes=4)
    by_name = {d.name: d for d in catalog.descriptors}
    four = next(d for d in catalog.descriptors if d.prompt_lanes == 4 and d.prompt_capacity == 1024)
    one = next(d for d in catalog.descriptors if d.is_mixed and d.prefill_capacity == 1024)
    runs = [
        ExecutionRecord(0.0, 1.0, "prefill", four.name, rows=4, tokens=900, prompt_tokens=900),
        ExecutionRecord(1.0, 2.0, "mixed", one.name, rows=3, tokens=1002, prompt_tokens=1000,
                        decoders=2),
        ExecutionRecord(2.0, 2.5, "decode", "not-in-the-catalog", rows=1, tokens=1),
    ]
    pad = padding_of(RunResult("helios", [], runs, 2.5), by_name)
    assert pad.computed == 1024 + 1024 + one.packed_capacity
    assert pad.prompt_padding == 124 + 24 and pad.row_padding == one.packed_capacity - 2
    assert (pad.multi_lane_frames, pad.prompt_frames) == (1, 2)
    assert (pad.prompt_frame_ms, pad.busy_ms) == (2.0, 2.5)


def test_speculative_mixed_programs_carry_the_declared_lanes():
    """Issue 39: min(L, B - 1) lanes, split evenly, in every speculative mixed program at a
    bucket that declares L > 1 (the adaptive catalog loads no ordinary mixed program)."""
    plain = helios_catalog("qwen38", 8, 32)
    assert not any(d.is_mixed and d.prompt_lanes > 1 for d in plain.descriptors)
    rec = helios_catalog("qwen38", 8, 32, lane_option=RECOMMENDED_LANES)
    laned = {
        (d.batch_capacity, d.token_capacity, d.prefill_capacity, d.prompt_lanes)
        for d in rec.descriptors
        if d.is_mixed and d.prompt_lanes > 1
    }
    assert all(d.speculation_enabled for d in rec.descriptors if d.is_mixed)
    assert (8, 1, 512, 4) in laned and (4, 1, 512, 2) in laned and (8, 1, 2048, 2) in laned
    assert not any(b == 2 for b, *_ in laned)  # one row stays a decoder
    assert all(capacity in dict(RECOMMENDED_LANES) for _, _, capacity, _ in laned)


def test_a_second_wave_shares_one_speculative_mixed_frame():
    """Four requests decode when four more arrive: with lanes several of the new prompts
    share one speculative mixed frame beside the decoders; every request ends."""
    setup = setup_for("qwen38-27b-dense-h200", 8, 32)
    first = random_workload(8)[:8]
    requests = [
        r.__class__(r.arrival_ms + (20.0 if i >= 4 else 0.0), 256, 8, r.acceptance)
        for i, r in enumerate(first)
    ]

    def shared(run: RunResult) -> list[str]:
        return [e.graph for e in run.executions if e.decoders and e.rows - e.decoders > 1]

    lanes = run_policy("helios+lanes4", requests, setup)
    assert lanes.finished == len(requests) and shared(lanes)
    assert all("mixed-spec" in g for g in shared(lanes))
    one = run_policy("helios+l1", requests, setup)
    assert one.finished == len(requests) and not shared(one)
