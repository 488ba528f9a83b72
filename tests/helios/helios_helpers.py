"""Measured synthetic catalogs and a tiny driver for scheduler tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from ignition.components.catalog import Catalog
from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind, ValueSource
from ignition.helios import (
    CompletionRecord,
    CompletionReport,
    ConfidenceSidecar,
    ExecutionTiming,
    Fence,
    LaneRole,
    PolicyConfig,
    RequestSpec,
    Resources,
    ScheduledPlan,
    Scheduler,
)
from ignition.helios.config import SpeculationMode

MS = 1_000_000


def prefill(c: int) -> Descriptor:
    return Descriptor(GraphKind.PREFILL, 1, 0, c, c)


def decode(b: int) -> Descriptor:
    return Descriptor(GraphKind.DECODE, b, 0, 1, b)


def spec(b: int, w: int, p: int | None = None, *, device: bool = False, d: int | None = None):
    depth = w - 1 if d is None else d
    return Descriptor(
        GraphKind.SPECULATIVE,
        b,
        depth,
        w,
        b * w if p is None else p,
        confidence_width=depth,
        speculation_enabled=True,
        value_source=ValueSource.SPECULATIVE_PREFIX_LIMIT if device else ValueSource.QUERY_LENGTH,
    )


def mixed(b: int, c: int, w: int = 1) -> Descriptor:
    return Descriptor(
        GraphKind.MIXED,
        b,
        w - 1,
        w,
        b * w,
        prefill_capacity=c,
        confidence_width=w - 1,
        speculation_enabled=w > 1,
    )


def catalog(descriptors: Iterable[Descriptor]) -> Catalog:
    return Catalog("synthetic", {}, tuple(descriptors))


def floor_ms(d: Descriptor) -> float:
    """A small, fast model: a launch floor plus modest per-row and per-token terms."""
    tokens = d.packed_capacity + d.prefill_capacity
    return 1.0 + 0.01 * d.batch_capacity + 0.002 * tokens + 0.05 * d.proposal_depth


def scheduler(
    descriptors: Iterable[Descriptor],
    cost_ms: Callable[[Descriptor], float] | dict | None = floor_ms,
    *,
    policy: PolicyConfig | None = None,
    resources: Resources | None = None,
    mode: SpeculationMode = SpeculationMode.ADAPTIVE,
) -> Scheduler:
    descriptors = list(descriptors)
    s = Scheduler(catalog(descriptors), policy, resources=resources, speculation=mode)
    if cost_ms is not None:
        for d in descriptors:
            ms = cost_ms.get(d) if isinstance(cost_ms, dict) else cost_ms(d)
            if ms:
                s.seed_cost(d, round(ms * MS))
    return s


def request(prompt: int = 64, output: int = 1000, **kw) -> RequestSpec:
    return RequestSpec(num_prompt_tokens=prompt, max_output_tokens=output, **kw)


def records_for(plan: ScheduledPlan, accepted: int = 0) -> list[CompletionRecord]:
    """Records where every decode lane accepts ``accepted`` drafts (bounded by its rows)."""
    out = []
    for lane in plan.lanes:
        if lane.role is LaneRole.PROMPT:
            out.append(
                CompletionRecord(
                    lane.handle, lane.num_prompt_tokens, (5,) * lane.max_advance_tokens
                )
            )
        else:
            n = min(lane.query_length, accepted + 1)
            out.append(CompletionRecord(lane.handle, 0, (5,) * n))
    return out


class Driver:
    """Plans, commits and completes frames one at a time on a clock."""

    def __init__(self, s: Scheduler) -> None:
        self.s = s
        self.fence = 0
        self.now = 0

    def step(self, accepted: int = 0, publish: bool = True) -> ScheduledPlan | None:
        plan = self.s.plan()
        if plan is None:
            return None
        self.fence += 1
        self.s.commit(plan, Fence(self.fence))
        duration = plan.estimated_duration_ns or MS
        self.now += duration
        self.s.advance_to(self.now)
        timing = ExecutionTiming(duration, duration)
        records = records_for(plan, accepted)
        d = plan.descriptor
        if d.is_device_allocated:
            records = [replace(r, num_verified_tokens=len(r.token_ids)) for r in records]
            plane = tuple((0.5,) * d.proposal_depth for _ in range(d.batch_capacity))
            sidecar = ConfidenceSidecar((plane, plane))
            tokens = self.s.complete(Fence(self.fence), CompletionReport(records, timing, sidecar))
        else:
            tokens = self.s.complete(Fence(self.fence), CompletionReport(records, timing))
        if publish:
            for handle in {t.handle for t in tokens}:
                self.s.published_output(handle, Fence(self.fence))
        return plan

    def run_until_out_of_pages(self, max_steps: int = 400) -> None:
        """Steps until the decoders hold every KV page (a step raises ResourceShortage)."""
        from ignition.helios import ResourceShortage

        for _ in range(max_steps):
            try:
                self.step()
            except ResourceShortage:
                return
        raise AssertionError("the decoders never ran out of pages")
