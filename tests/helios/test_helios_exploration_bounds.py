"""The exploration bounds over long simulated runs (property tests).

For credited ordinary duration O, exploration duration P and the actual duration D of
the current or last episode, timing refresh keeps P <= 0.002 / 0.998 * O + D and
acceptance learning keeps P <= 0.01 / 0.99 * O + D at every point of a run. The driver
below computes O, P and D itself, from the timings it reports and the classes of the
plans it commits, with random costs, staleness, noise, invalid timings, readiness
stalls, cancellations and idle gaps.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from helios_helpers import MS, decode, prefill, records_for, request, scheduler, spec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ignition.helios import (
    CompletionReport,
    ConfidenceSidecar,
    ExecutionTiming,
    Fence,
    PolicyConfig,
    Resources,
    ScheduledPlan,
    SchedulerError,
)
from ignition.helios.plans import ExecutionClass

CATALOG = [
    prefill(64),
    prefill(256),
    decode(1),
    decode(2),
    decode(4),
    spec(1, 3),
    spec(2, 3),
    spec(4, 2),
    spec(2, 4, 5, device=True),
]
EXPLORATION = {
    ExecutionClass.TIMING_REFRESH: (2, 998),
    ExecutionClass.ACCEPTANCE_LEARNING: (1, 99),
}


@dataclass
class _Frame:
    fence: int
    plan: ScheduledPlan
    queued: bool = False


@dataclass
class Books:
    """O, P and D as the driver sees them."""

    ordinary_ns: int = 0
    spent: dict = field(default_factory=lambda: dict.fromkeys(EXPLORATION, 0))
    last: dict = field(default_factory=lambda: dict.fromkeys(EXPLORATION, 0))
    episodes: dict = field(default_factory=lambda: dict.fromkeys(EXPLORATION, 0))

    def check(self) -> None:
        for cls, (num, den) in EXPLORATION.items():
            # P <= num/den * O + D, in exact integers
            assert den * self.spent[cls] <= num * self.ordinary_ns + den * self.last[cls], cls


def simulated_run(seed: int, frames: int = 400) -> Books:
    rng = random.Random(seed)
    costs = {d: rng.uniform(5.0, 60.0) for d in CATALOG}
    policy = PolicyConfig(estimate_ttl_ns=round(rng.uniform(100.0, 3000.0) * MS))
    s = scheduler(CATALOG, costs, policy=policy, resources=Resources(num_request_slots=6))
    books = Books()
    inflight: list[_Frame] = []
    now, fence = 0, 0
    acceptance = {}

    def admit() -> None:
        prior = tuple(rng.choice([0.0, 0.1, 0.5, 0.9]) for _ in range(3))
        h = s.admit(request(64, rng.randint(2, 400), acceptance_prior=prior))
        acceptance[h] = rng.random()

    for _ in range(frames):
        if s.pool.can_allocate_slot() and rng.random() < 0.15:
            admit()
        if s.requests and rng.random() < 0.03:
            victim = rng.choice(list(s.requests))
            if not s.requests[victim].is_cancelled:
                s.cancel(victim)
        while len(inflight) < 2:
            plan = s.plan()
            if plan is None:
                break
            fence += 1
            try:
                s.commit(plan, Fence(fence))
            except SchedulerError:
                break
            frame = _Frame(fence, plan)
            if inflight:
                frame.queued = True
                for f in inflight:
                    f.queued = True
            inflight.append(frame)
            books.check()  # an open episode has not paid yet: D is the last one
        if not inflight:
            now += round(rng.uniform(1.0, 500.0) * MS)  # idle gap (or nothing runnable)
            s.advance_to(now)
            if not s.requests:
                admit()
            continue
        frame = inflight.pop(0)
        plan = frame.plan
        estimate = plan.estimated_duration_ns or round(costs[plan.descriptor] * MS)
        device = round(estimate * rng.lognormvariate(0.0, 0.3))
        if rng.random() < 0.05:
            device = 0  # a missing device interval
        wall = device + round(rng.uniform(0.0, 2.0) * MS)
        stall = round(rng.uniform(0.0, 0.2) * device) if rng.random() < 0.2 else 0
        timing = ExecutionTiming(device, wall, stall)
        now += max(wall, 1)
        s.advance_to(now)
        accepted = 0 if rng.random() > 0.5 else rng.randint(0, 3)
        records = [
            r if s.requests.get(r.handle) and s.requests[r.handle].is_live else type(r)(r.handle)
            for r in records_for(plan, accepted)
        ]
        d = plan.descriptor
        if d.is_device_allocated:  # the device allocates one row per lane here: fits P
            records = [
                replace(r, token_ids=r.token_ids[:1], num_verified_tokens=1) if r.token_ids else r
                for r in records
            ]
            plane = tuple((0.5,) * d.proposal_depth for _ in range(d.batch_capacity))
            tokens = s.complete(
                Fence(frame.fence),
                CompletionReport(records, timing, ConfidenceSidecar((plane, plane))),
            )
        else:
            tokens = s.complete(Fence(frame.fence), CompletionReport(records, timing))
        for h in {t.handle for t in tokens}:
            s.published_output(h, Fence(frame.fence))
        cls = plan.execution_class
        if cls is ExecutionClass.ORDINARY and device > 0:
            books.ordinary_ns += device if frame.queued else max(device, wall)
        elif cls in EXPLORATION:
            paid = max(device, wall)
            books.spent[cls] += paid
            books.last[cls] = paid
            books.episodes[cls] += 1
        books.check()
    totals = s.execution_totals()
    assert totals["ordinary"]["nanoseconds"] == books.ordinary_ns
    for cls in EXPLORATION:
        assert totals[cls.value]["nanoseconds"] == books.spent[cls]
        assert totals[cls.value]["episodes"] == books.episodes[cls]
    return books


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**31))
def test_refresh_and_learning_bounds_hold_at_every_point_of_a_simulated_run(seed):
    simulated_run(seed)


def test_long_simulated_runs_do_explore():
    """The property above is not vacuous: long runs open episodes of both kinds."""
    total = dict.fromkeys(EXPLORATION, 0)
    for seed in range(4):
        books = simulated_run(seed, frames=1500)
        for cls in EXPLORATION:
            total[cls] += books.episodes[cls]
    assert all(count > 0 for count in total.values()), total
