"""Shared set-ups for funded timing refresh and acceptance learning tests."""

from __future__ import annotations

from dataclasses import replace

from helios_helpers import MS, decode, prefill, records_for, request, scheduler, spec

from ignition.helios import (
    CompletionReport,
    ConfidenceSidecar,
    ExecutionTiming,
    Fence,
    PolicyConfig,
    ScheduledPlan,
    Scheduler,
)
from ignition.helios.config import SpeculationMode
from ignition.helios.plans import ExecutionClass

REFRESH = ExecutionClass.TIMING_REFRESH
LEARNING = ExecutionClass.ACCEPTANCE_LEARNING
ORDINARY = ExecutionClass.ORDINARY
DISCOVERY = ExecutionClass.DISCOVERY


class Runner:
    """Plans, commits and completes one frame at a time; timing is chosen per frame."""

    def __init__(self, s: Scheduler) -> None:
        self.s = s
        self.fence = 0
        self.now = 0

    def wait(self, ns: int) -> None:
        self.now += ns
        self.s.advance_to(self.now)

    def commit(self, plan: ScheduledPlan) -> int:
        self.fence += 1
        self.s.commit(plan, Fence(self.fence))
        return self.fence

    def finish(
        self,
        plan: ScheduledPlan,
        fence: int,
        timing: ExecutionTiming | None = None,
        accepted: int = 0,
    ):
        duration = plan.estimated_duration_ns or MS
        timing = timing or ExecutionTiming(duration, duration)
        self.now += max(timing.device_ns, timing.wall_ns, 1)
        self.s.advance_to(self.now)
        records = records_for(plan, accepted)
        d = plan.descriptor
        if d.is_device_allocated:
            records = [replace(r, num_verified_tokens=len(r.token_ids)) for r in records]
            plane = tuple((0.5,) * d.proposal_depth for _ in range(d.batch_capacity))
            tokens = self.s.complete(
                Fence(fence), CompletionReport(records, timing, ConfidenceSidecar((plane, plane)))
            )
        else:
            tokens = self.s.complete(Fence(fence), CompletionReport(records, timing))
        for handle in {t.handle for t in tokens}:
            self.s.published_output(handle, Fence(fence))
        return tokens

    def step(self, timing: ExecutionTiming | None = None, accepted: int = 0):
        plan = self.s.plan()
        if plan is None:
            return None
        self.finish(plan, self.commit(plan), timing, accepted)
        return plan

    def decoding(self, n: int, **kw):
        handles = [self.s.admit(request(64, **kw)) for _ in range(n)]
        while any(not self.s.requests[h].is_decoder for h in handles):
            self.step()
        return handles


def stale_alternative_setup(ttl_ms: float = 1000.0) -> tuple[Scheduler, Runner]:
    """Two decoders on decode(1) (80 ms) and decode(2) (100 ms): decode(2) wins every
    ordinary decision, so decode(1) goes stale after ``ttl_ms`` while credit builds."""
    policy = PolicyConfig(estimate_ttl_ns=round(ttl_ms * MS))
    costs = {prefill(64): 1.0, decode(1): 80.0, decode(2): 100.0}
    s = scheduler([prefill(64), decode(1), decode(2)], costs, policy=policy)
    runner = Runner(s)
    runner.decoding(2)
    return s, runner


def run_until_full_refresh_credit(s: Scheduler, runner: Runner, limit: int = 200) -> None:
    for _ in range(limit):
        if s.refresh.has_full_credit():
            return
        plan = runner.step()
        assert plan is not None and plan.execution_class is ORDINARY
    raise AssertionError("refresh credit never became full")


def pessimistic_setup(
    *, mode: SpeculationMode = SpeculationMode.ADAPTIVE, output: int = 1000, spec_ms: float = 20.0
) -> tuple[Scheduler, Runner]:
    """One decoder whose acceptance history says drafts never survive, a 10 ms decode graph
    and a width-three speculative graph that its optimistic estimate makes worth probing."""
    costs = {prefill(64): 1.0, decode(1): 10.0, spec(1, 3): spec_ms}
    s = scheduler([prefill(64), decode(1), spec(1, 3)], costs, mode=mode)
    runner = Runner(s)
    runner.decoding(1, acceptance_prior=(0.0, 0.0), output=output)
    return s, runner


__all__ = [
    "DISCOVERY",
    "LEARNING",
    "MS",
    "ORDINARY",
    "REFRESH",
    "Runner",
    "pessimistic_setup",
    "run_until_full_refresh_credit",
    "stale_alternative_setup",
]
