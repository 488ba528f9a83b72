"""Request (batch) buckets: the row counts generation programs are prepared at.

The seed prepares powers of two through the padded concurrency. A build may instead use a
step grid, vLLM's CUDA-graph capture sizes for ``step`` 8 (1, 2, 4, then every multiple of
8): a frame of 40 decoders then runs a 40-row program rather than a 64-row one
(``capacity.concurrency_defaults[i].batch_bucket_step``; docs/capacity.md, "Step-8 batch
buckets for serving builds"). Mixed programs keep powers of two (the mixed contract).
"""

from __future__ import annotations

from ignition.recipes.options import BUCKET_STEP_RULE, is_bucket_step


def next_power_of_two(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def request_buckets(padded_concurrency: int, minimum: int = 1) -> list[int]:
    """Power-of-two request buckets from ``minimum`` through the padded concurrency."""
    buckets, b = [], 1
    while b <= padded_concurrency:
        if b >= minimum:
            buckets.append(b)
        b *= 2
    return buckets


def generation_buckets(padded_concurrency: int, step: int) -> list[int]:
    """The batch buckets of decode and speculative programs: powers of two for ``step`` 0,
    else the powers of two below ``step`` and every multiple of it through the padded
    concurrency."""
    if not is_bucket_step(step):
        raise ValueError(f"batch bucket step {step}: {BUCKET_STEP_RULE}")
    if step == 0:
        return request_buckets(padded_concurrency)
    low = [b for b in request_buckets(padded_concurrency) if b < step]
    return low + list(range(step, padded_concurrency + 1, step))
