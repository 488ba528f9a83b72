"""Device profiles of the released model family (issue 29 item 1, docs/devices.md)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ignition.components.program_kinds import GraphKind
from ignition.simulate.calibration import calibration_table, holds, ratios
from ignition.simulate.devices import PROFILES, DeviceError, Execution, device_from_spec

H200 = PROFILES["qwen38-flash-next-h200"]
TP4 = PROFILES["qwen38-flash-next-4xh100"]
DENSE = PROFILES["qwen38-27b-dense-h200"]


def decode(rows: int, width: int = 1, context: int = 1000, prompt: int = 0) -> Execution:
    tokens = rows * width + prompt
    return Execution(
        GraphKind.SPECULATIVE if width > 1 else GraphKind.DECODE,
        tokens,
        rows,
        tokens,
        rows,
        rows * context,
        width - 1,
        prompt_tokens=prompt,
        row_contexts=(context,) * rows,
    )


def test_every_profile_is_named_by_its_spec():
    for name, profile in PROFILES.items():
        assert device_from_spec(name) is profile


def test_an_unknown_profile_is_one_line_naming_it_and_the_known_ones():
    with pytest.raises(DeviceError, match=r"unknown device profile 'qwen38-h100'.*4xh100"):
        device_from_spec("qwen38-h100")


def test_expert_reads_grow_with_the_distinct_experts_a_batch_touches():
    assert H200.experts_touched(1) == pytest.approx(10, rel=0.01)
    assert H200.experts_touched(64) < 64 * 10
    assert H200.experts_touched(4096) == pytest.approx(512, rel=0.001)
    assert H200.duration_ms(decode(32)) > H200.duration_ms(decode(8))


def test_attention_reads_are_bounded_by_the_index_budget():
    short = replace(H200, floor_ms=0.0).duration_ms(decode(16, context=2048))
    long = replace(H200, floor_ms=0.0).duration_ms(decode(16, context=200_000))
    index_only = 16 * (200_000 - 2048) * H200.index_bytes_per_token
    bandwidth = H200.gpu.bandwidth * H200.gpu.bandwidth_fraction
    assert long - short == pytest.approx(index_only / bandwidth * 1e3, rel=1e-6)


def test_host_ple_rows_cost_each_decode_token_and_device_rows_far_less():
    host = H200.ple_delivery_ms(64)
    assert host == pytest.approx(64 * H200.ple_host_us_per_token * 1e-3)
    assert replace(H200, ple_residency="device").ple_delivery_ms(64) < host / 100


def test_a_draft_step_is_a_full_moe_layer_whose_experts_grow_with_the_rows():
    one, many = H200.draft_step_ms(1), H200.draft_step_ms(64)
    assert one > H200.draft_floor_ms
    experts = (H200.experts_touched(64) - H200.experts_touched(1)) * H200.expert_bytes
    assert many - one > experts / (H200.gpu.bandwidth * H200.gpu.bandwidth_fraction) * 1e3


def test_tensor_parallel_forward_pays_all_reduces():
    assert TP4.all_reduce_ms(64, 97) > 97 * TP4.all_reduce_us * 1e-3
    assert H200.all_reduce_ms(64, 97) == 0.0


def test_wide_verification_at_a_large_batch_is_compute_bound_on_the_dense_profile():
    narrow, wide = DENSE.duration_ms(decode(4, 4)), DENSE.duration_ms(decode(32, 6))
    rate = DENSE.gpu.flops * DENSE.gpu.flops_fraction
    bandwidth = DENSE.gpu.bandwidth * DENSE.gpu.bandwidth_fraction
    assert 2 * DENSE.active_params * 192 / rate > DENSE.dense_bytes / bandwidth
    assert wide > 1.2 * narrow


def test_the_4xh100_profile_reproduces_vllms_published_recipe_table():
    rows = calibration_table(TP4)
    assert holds(rows), [(r.concurrency, r.speculative, r.simulated) for r in rows]
    assert ratios(rows)[64][1] < 0.75  # MTP loses at concurrency 64, as published


def test_host_ple_prompts_are_gathered_one_after_another_before_their_first_chunk():
    from ignition.simulate.baselines import make_baseline
    from ignition.simulate.engine import run_baseline
    from ignition.simulate.workloads import SimRequest

    device = replace(H200, ple_prefetch_us_per_token=100.0)
    requests = [SimRequest(0.0, 1000, 4), SimRequest(0.0, 1000, 4)]
    run = run_baseline(make_baseline("vllm"), requests, device, slots=4, noise_sigma=0.0)
    starts = sorted(r.prompt_start_ms for r in run.requests)
    assert starts[0] == pytest.approx(100.0) and starts[1] >= 200.0
    assert H200.prompt_ready_ms(1000) == pytest.approx(1000 * H200.ple_prefetch_us_per_token / 1e3)


def test_a_request_whose_gather_has_not_started_is_not_ready():
    """Issue 39: with more requests than free slots, the requests beyond them have not
    started their host gather; they were taken as ready (no gather at all) and ran
    first, while the gathered ones waited. Every prompt now starts after its gather."""
    from ignition.simulate.baselines import make_baseline
    from ignition.simulate.engine import run_baseline
    from ignition.simulate.workloads import SimRequest

    device = replace(H200, ple_prefetch_us_per_token=100.0)
    requests = [SimRequest(0.0, 1000, 4) for _ in range(6)]
    run = run_baseline(make_baseline("vllm"), requests, device, slots=2, noise_sigma=0.0)
    starts = sorted(r.prompt_start_ms for r in run.requests)
    assert starts[0] == pytest.approx(100.0)
    assert all(b >= a + 100.0 - 1e-6 for a, b in zip(starts, starts[1:], strict=False))
