"""Named device profiles: the released model on the hardware people serve it on
(docs/simulate.md, "devices/profiles.py"; ``docs/devices.md`` derives every constant)."""

from __future__ import annotations

from dataclasses import replace

from ignition.simulate.devices.hybrid import H100, H200, HybridMoE

# The software costs a roofline cannot know, fitted by ``python -m
# ignition.simulate.calibration --fit`` against vLLM's published table (rounded), with the
# achieved FP8 rate held at or above a quarter of the GPU's (``MIN_FLOPS_FRACTION``).
CALIBRATED = {
    "floor_ms": 8.0,
    "ple_host_us_per_token": 313.0,
    "ple_prefetch_us_per_token": 160.0,
    "draft_floor_ms": 1.4,
    "speculative_row_us": 94.0,
}
CALIBRATED_FLOPS_FRACTION = 0.26

QWEN38_FLASH_NEXT_4XH100 = HybridMoE(
    name="qwen38-flash-next-4xh100",
    gpu=replace(H100, flops_fraction=CALIBRATED_FLOPS_FRACTION),
    gpus=4,
    all_reduce_us=10.0,
    **CALIBRATED,
)

# One H200 with the same software (an unverified transfer of the 4x H100 fit: the same
# kernels, engine step and host gather; no all-reduces).
QWEN38_FLASH_NEXT_H200 = HybridMoE(
    name="qwen38-flash-next-h200",
    gpu=replace(H200, flops_fraction=CALIBRATED_FLOPS_FRACTION),
    gpus=1,
    **CALIBRATED,
)

# Qwen3.5-architecture dense 27B: 64 layers (48 GDN + 16 full attention), hidden 5120,
# 4 KV heads of 256, 48 value heads of GDN state; FP8 weights, no PLE. The MTP head is
# one dense decoder layer (27e9 / 64 bytes) plus the vocabulary head.
QWEN38_27B_DENSE_H200 = HybridMoE(
    name="qwen38-27b-dense-h200",
    gpu=H200,
    gpus=1,
    hidden=5120,
    moe_layers=64,
    qsa_layers=16,
    query_heads=24,
    head_dim=256,
    num_experts=0,
    routed_experts=0,
    expert_bytes=0.0,
    dense_bytes=27e9,
    active_params=27e9,
    kv_bytes_per_token=16 * 2 * 4 * 256,
    index_bytes_per_token=0.0,
    attention_budget=1 << 30,
    gdn_state_bytes=48 * 48 * 128 * 128 * 2,
    ple_residency="none",
    ple_bytes_per_token=0.0,
    mtp_dense_bytes=27e9 / 64,
    lm_head_bytes=248_320 * 5120,
    draft_floor_ms=0.5,
    floor_ms=2.0,
)

PROFILES: dict[str, HybridMoE] = {
    p.name: p for p in (QWEN38_FLASH_NEXT_H200, QWEN38_FLASH_NEXT_4XH100, QWEN38_27B_DENSE_H200)
}
