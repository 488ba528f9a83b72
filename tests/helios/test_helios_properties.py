"""Random admit/plan/commit/complete/cancel sequences keep ownership invariants.

"One request in two frames at once" is read with the design's queue rules: a request
never holds two lanes of one frame, and a request whose lane needs completion feedback
(a prompt row) is in no other frame. Ordinary decode and complete speculative rounds
may queue the same decoder twice (that is what the second frame slot is for).
"""

from __future__ import annotations

from helios_helpers import MS, decode, mixed, prefill, records_for, request, scheduler, spec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ignition.helios import (
    CompletionReport,
    ExecutionTiming,
    Fence,
    LaneRole,
    Resources,
    SchedulerError,
)

CATALOG = [
    prefill(64),
    prefill(256),
    decode(1),
    decode(2),
    decode(4),
    spec(2, 3),
    spec(4, 2),
    mixed(2, 64),
    mixed(4, 64, w=2),
]
RESOURCES = Resources(num_request_slots=4, num_pages=40, page_size_tokens=16)

ops = st.lists(
    st.tuples(
        st.sampled_from(["admit", "plan", "complete", "cancel", "publish", "wait", "corrupt"]),
        st.integers(0, 1000),
    ),
    max_size=60,
)


def check_invariants(s, cancelled_charges):
    slots = [h.slot for h in s.requests]
    assert len(slots) == len(set(slots)), "a slot is owned twice"
    assert s.pool.num_owned_slots == len(s.requests)
    owned_pages = sum(r.num_pages for r in s.requests.values())
    assert owned_pages + s.pool.num_free_pages == RESOURCES.num_pages, "a page is owned twice"
    assert s.pool.num_free_pages >= 0
    for frame in s.queue.frames:
        handles = [lane.handle for lane in frame.plan.lanes]
        assert len(handles) == len(set(handles)), "a request appears twice in one frame"
        for lane in frame.plan.lanes:
            if lane.role is LaneRole.PROMPT:
                others = [
                    f for f in s.queue.frames if f is not frame and f.plan.lane_of(lane.handle)
                ]
                assert not others, "a prompt row shares its request with another frame"
    for handle, rates in cancelled_charges.items():
        r = s.requests.get(handle)
        if r is not None:
            assert (r.rates.token_rate, r.rates.delivery_rate) == rates, (
                "a cancelled handle was charged"
            )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_random_sequences_never_double_own_or_charge_a_cancelled_handle(sequence):
    s = scheduler(CATALOG, resources=RESOURCES)
    fence, now = 0, 0
    last_tokens = []
    cancelled: dict = {}
    for op, arg in sequence:
        try:
            if op == "admit":
                s.admit(request(1 + arg % 300, output=1 + arg % 7))
            elif op == "plan":
                plan = s.plan()
                if plan is not None:
                    fence += 1
                    s.commit(plan, Fence(fence))
            elif op in ("complete", "corrupt") and s.queue.frames:
                frame = s.queue.frames[0]
                records = records_for(frame.plan, accepted=arg % 3)
                if op == "corrupt":
                    records = records[:-1]
                timing = ExecutionTiming(device_ns=MS + arg, wall_ns=MS)
                last_tokens = s.complete(Fence(frame.fence), CompletionReport(records, timing))
                last_tokens = [(t.handle, t.fence) for t in last_tokens]
            elif op == "cancel" and s.requests:
                handle = sorted(s.requests)[arg % len(s.requests)]
                s.cancel(handle)
                r = s.requests.get(handle)
                if r is not None:
                    cancelled[handle] = (r.rates.token_rate, r.rates.delivery_rate)
            elif op == "publish" and last_tokens:
                handle, f = last_tokens[arg % len(last_tokens)]
                s.published_output(handle, f)
            elif op == "wait":
                now += arg * 10_000
                s.advance_to(now)
        except SchedulerError:
            pass
        check_invariants(s, cancelled)
