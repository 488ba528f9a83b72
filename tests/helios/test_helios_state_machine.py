"""A hypothesis state machine over the Helios API (issue 15's reliability suite).

Random sequences of admit, plan + commit, complete (with valid and malformed
records, and with the wrong fence), cancel and publish. After every step the
resource and fence invariants must hold: pages and slots are conserved, every
in-flight fence of a request is a queued frame holding it, fences rise, and a
rejected call changes nothing.
"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ignition.components.capacity import plan_catalog
from ignition.helios import (
    CompletionRecord,
    CompletionReport,
    ExecutionTiming,
    Fence,
    LaneRole,
    RequestSpec,
    Resources,
    Scheduler,
    SchedulerError,
)
from ignition.recipes import LoadOptions, get_recipe

CATALOG = plan_catalog(get_recipe("qwen38"), LoadOptions(mixed_prefill=True, speculation="off"))
NUM_SLOTS, NUM_PAGES, PAGE_SIZE = 4, 48, 64
MALFORMATIONS = ("count", "handle", "negative", "too_many", "prompt_count")


def valid_records(plan, scheduler) -> tuple[CompletionRecord, ...]:
    records = []
    for lane in plan.lanes:
        if lane.role is LaneRole.PROMPT:
            ids = (7,) * lane.max_advance_tokens
            records.append(CompletionRecord(lane.handle, lane.num_prompt_tokens, ids))
            continue
        r = scheduler.requests.get(lane.handle)
        live = r is not None and r.is_live
        count = min(lane.query_length, lane.max_advance_tokens) if live else 0
        records.append(CompletionRecord(lane.handle, 0, (5,) * count))
    return tuple(records)


def malformed(records, plan, kind: str) -> tuple[CompletionRecord, ...] | None:
    first = records[0]
    if kind == "count":
        return (*records, first)
    if kind == "handle":
        other = dataclasses.replace(first.handle, generation=first.handle.generation + 99)
        return (dataclasses.replace(first, handle=other), *records[1:])
    if kind == "negative":
        return (dataclasses.replace(first, token_ids=(-1,)), *records[1:])
    decode = [i for i, lane in enumerate(plan.lanes) if lane.role is LaneRole.DECODE]
    prompt = [i for i, lane in enumerate(plan.lanes) if lane.role is LaneRole.PROMPT]
    if kind == "too_many" and decode:
        i = decode[0]
        bad = dataclasses.replace(records[i], token_ids=(5,) * (plan.lanes[i].query_length + 5))
        return (*records[:i], bad, *records[i + 1 :])
    if kind == "prompt_count" and prompt:
        i = prompt[0]
        bad = dataclasses.replace(records[i], num_prompt_tokens=records[i].num_prompt_tokens + 1)
        return (*records[:i], bad, *records[i + 1 :])
    return None


def fingerprint(s: Scheduler):
    """Everything a rejected call must leave as it was."""
    return (
        s.pool.num_free_pages,
        tuple(s.pool._free_slots),
        tuple(f.fence for f in s.queue.frames),
        tuple(
            (h, r.num_pages, r.num_output, r.prompt_position, tuple(r.inflight), r.is_cancelled)
            for h, r in sorted(s.requests.items(), key=lambda kv: kv[0].slot)
        ),
    )


class HeliosMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        resources = Resources(
            num_request_slots=NUM_SLOTS, num_pages=NUM_PAGES, page_size_tokens=PAGE_SIZE
        )
        self.s = Scheduler(CATALOG, resources=resources)
        self.next_fence = 0
        self.now_ns = 0
        self.publishable: list[tuple] = []
        self.last_fence = -1

    def tick(self) -> None:
        self.now_ns += 1_000_000
        self.s.advance_to(self.now_ns)

    @rule(prompt=st.integers(1, 700), output=st.integers(1, 12))
    def admit(self, prompt, output):
        spec = RequestSpec(
            num_prompt_tokens=prompt, max_output_tokens=output, context_capacity=2048
        )
        if self.s.pool.can_allocate_slot():
            handle = self.s.admit(spec)
            assert handle in self.s.requests
        else:
            before = fingerprint(self.s)
            try:
                self.s.admit(spec)
            except SchedulerError:
                assert fingerprint(self.s) == before
            else:
                raise AssertionError("admitted without a free slot")

    @rule()
    def plan_and_commit(self):
        self.tick()
        plan = self.s.plan()
        if plan is None:
            return
        before = fingerprint(self.s)
        try:
            self.s.commit(plan, Fence(self.next_fence))
        except SchedulerError:
            assert fingerprint(self.s) == before
            return
        assert self.next_fence > self.last_fence
        self.last_fence = self.next_fence
        self.next_fence += 1

    @precondition(lambda self: len(self.s.queue) > 0)
    @rule()
    def complete(self):
        self.tick()
        head = self.s.queue.head()
        tokens = self.s.complete(
            Fence(head.fence),
            CompletionReport(valid_records(head.plan, self.s), ExecutionTiming(device_ns=500_000)),
        )
        self.publishable = [(t.handle, Fence(head.fence)) for t in tokens]

    @precondition(lambda self: len(self.s.queue) > 0)
    @rule(kind=st.sampled_from(MALFORMATIONS))
    def complete_malformed(self, kind):
        head = self.s.queue.head()
        records = malformed(valid_records(head.plan, self.s), head.plan, kind)
        if records is None:
            return
        before = fingerprint(self.s)
        try:
            self.s.complete(
                Fence(head.fence), CompletionReport(records, ExecutionTiming(device_ns=500_000))
            )
        except SchedulerError:
            assert fingerprint(self.s) == before
        else:
            raise AssertionError(f"Helios accepted {kind} records")

    @precondition(lambda self: len(self.s.queue) > 1)
    @rule()
    def complete_out_of_order(self):
        second = self.s.queue.frames[1]
        before = fingerprint(self.s)
        try:
            self.s.complete(
                Fence(second.fence),
                CompletionReport(valid_records(second.plan, self.s), ExecutionTiming(device_ns=1)),
            )
        except SchedulerError:
            assert fingerprint(self.s) == before
        else:
            raise AssertionError("completed a fence that is not the oldest")

    @precondition(lambda self: bool(self.s.requests))
    @rule(data=st.data())
    def cancel(self, data):
        handle = data.draw(st.sampled_from(sorted(self.s.requests, key=lambda h: h.slot)))
        request = self.s.requests[handle]
        if request.is_cancelled:
            before = fingerprint(self.s)
            try:
                self.s.cancel(handle)
            except SchedulerError:
                assert fingerprint(self.s) == before
            else:
                raise AssertionError("cancelled twice")
            return
        self.s.cancel(handle)
        if not request.inflight:
            assert handle not in self.s.requests  # released at once when nothing is in flight

    @precondition(lambda self: bool(self.publishable))
    @rule(data=st.data())
    def publish(self, data):
        handle, fence = data.draw(st.sampled_from(self.publishable))
        self.s.published_output(handle, fence)

    @invariant()
    def pages_and_slots_are_conserved(self):
        s = self.s
        held = sum(r.num_pages for r in s.requests.values())
        assert s.pool.num_free_pages + held == NUM_PAGES
        assert s.pool.num_free_pages >= 0
        assert len(s.pool._free_slots) + len(s.requests) == NUM_SLOTS
        assert {h.slot for h in s.requests}.isdisjoint(s.pool._free_slots)

    @invariant()
    def fences_rise_and_in_flight_work_is_queued(self):
        fences = [f.fence for f in self.s.queue.frames]
        assert fences == sorted(set(fences))
        assert len(fences) <= 2
        for handle, r in self.s.requests.items():
            assert r.inflight == sorted(r.inflight)
            for fence in r.inflight:
                frame = next(f for f in self.s.queue.frames if f.fence == fence)
                assert frame.plan.lane_of(handle) is not None
        for frame in self.s.queue.frames:
            handles = [lane.handle for lane in frame.plan.lanes]
            assert len(handles) == len(set(handles))

    @invariant()
    def output_never_exceeds_its_limit(self):
        for r in self.s.requests.values():
            assert r.num_output <= r.spec.max_output_tokens
            assert r.prompt_position <= r.spec.num_prompt_tokens


HeliosMachine.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
test_helios_state_machine = HeliosMachine.TestCase
