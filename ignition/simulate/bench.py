"""plan() latency over the full qwen38 catalog with measured costs (not a test).

Run ``python -m ignition.simulate.bench``; prints p50 and p99 in microseconds at 1, 8
and 64 active requests (three quarters decoding, the rest waiting on prompts).
"""

from __future__ import annotations

import statistics
import time

from ignition.components.catalog import Catalog, GraphKind
from ignition.helios.scheduler import Scheduler
from ignition.helios.types import (
    CompletionRecord,
    ExecutionTiming,
    Fence,
    LaneRole,
    RequestSpec,
    Resources,
)
from ignition.simulate.scenario import Formula

H200_LIKE = {
    GraphKind.PREFILL: Formula(base_ms=38.0, per_token_ms=0.006),
    GraphKind.DECODE: Formula(base_ms=2.4, per_row_ms=1.0),
    GraphKind.SPECULATIVE: Formula(
        base_ms=2.4, per_row_ms=1.0, per_token_ms=0.6, per_draft_ms=0.25
    ),
    GraphKind.MIXED: Formula(base_ms=38.0, per_row_ms=1.0, per_token_ms=0.006, per_draft_ms=0.25),
}


def qwen38_catalog() -> Catalog:
    from ignition.components.capacity import plan_catalog
    from ignition.recipes import LoadOptions, get_recipe

    return plan_catalog(get_recipe("qwen38"), LoadOptions(mixed_prefill=True))


def prepared(catalog: Catalog, num_requests: int) -> Scheduler:
    s = Scheduler(catalog, resources=Resources(num_request_slots=64))
    for d in s.descriptors:
        s.seed_cost(d, round(H200_LIKE[d.kind].duration_ms(d) * 1e6))
    decoders = [
        s.admit(RequestSpec(64, 100_000, acceptance_prior=(0.7, 0.5, 0.3, 0.2, 0.1)))
        for _ in range(max(1, num_requests * 3 // 4))
    ]
    fence, now = 0, 0
    while any(not s.requests[h].is_decoder for h in decoders):
        plan = s.plan()
        fence += 1
        s.commit(plan, Fence(fence))
        now += plan.estimated_duration_ns
        s.advance_to(now)
        records = [
            CompletionRecord(
                lane.handle,
                lane.num_prompt_tokens,
                (1,) * (lane.max_advance_tokens if lane.role is LaneRole.PROMPT else 1),
            )
            for lane in plan.lanes
        ]
        tokens = s.complete(Fence(fence), records, ExecutionTiming(plan.estimated_duration_ns))
        for handle in {t.handle for t in tokens}:
            s.published_output(handle, Fence(fence))
    for _ in range(num_requests - len(decoders)):
        s.admit(RequestSpec(3000, 200))
    return s


def _percentiles(samples: list[float]) -> tuple[float, float]:
    samples = sorted(samples)
    return statistics.median(samples), samples[int(0.99 * (len(samples) - 1))]


def measure(num_requests: int, iterations: int = 2000) -> dict[str, tuple[float, float]]:
    """Wall and process-CPU percentiles; on a shared machine wall p99 shows preemption."""
    s = prepared(qwen38_catalog(), num_requests)
    wall, cpu = [], []
    for i in range(iterations):
        s.advance_to(s.now_ns + 1000 * (i % 3))
        start, start_cpu = time.perf_counter_ns(), time.process_time_ns()
        s.plan()
        wall.append((time.perf_counter_ns() - start) / 1000)
        cpu.append((time.process_time_ns() - start_cpu) / 1000)
    return {"wall": _percentiles(wall), "cpu": _percentiles(cpu)}


def main() -> None:
    for n in (1, 8, 64):
        result = measure(n)
        (w50, w99), (c50, c99) = result["wall"], result["cpu"]
        print(
            f"plan() with {n:>2} active requests: wall p50 {w50:7.1f} us p99 {w99:7.1f} us | "
            f"cpu p50 {c50:7.1f} us p99 {c99:7.1f} us"
        )


if __name__ == "__main__":
    main()
