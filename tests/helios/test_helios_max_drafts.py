"""A request's own draft limit (RequestSpec.max_drafts): the seed's acceptance "respects
available proposals, grammar and stop restrictions". A grammar-constrained request, whose
token masks the host computes one token at a time, verifies no drafts (max_drafts = 0),
whatever widths the others in its frame use."""

from __future__ import annotations

import pytest
from helios_helpers import Driver, prefill, request, scheduler, spec

from ignition.helios import Fence, LaneRole, SchedulerError
from ignition.helios.config import SpeculationMode

SHAPES = [prefill(64), spec(4, 1), spec(4, 2), spec(4, 4)]
CONFIDENT = (0.95, 0.9, 0.85)


def _decoding(limits):
    s = scheduler(SHAPES, mode=SpeculationMode.FIXED)
    handles = [s.admit(request(16, 400, acceptance_prior=CONFIDENT, max_drafts=m)) for m in limits]
    driver = Driver(s)
    while not all(s.requests[h].is_decoder for h in handles):
        driver.step()
    return s, handles, driver


def _rows(plan, handles):
    rows = {lane.handle: lane.query_length for lane in plan.lanes if lane.role is LaneRole.DECODE}
    return [rows.get(h) for h in handles]


@pytest.mark.parametrize(("limit", "rows"), [(0, 1), (1, 2)])
def test_a_limited_request_verifies_at_most_its_drafts_beside_wider_rows(limit, rows):
    _, handles, driver = _decoding([None, None, limit])
    widths = set()
    for _ in range(5):
        plan = driver.step(accepted=3)
        width = plan.descriptor.token_capacity
        widths.add(width)
        assert _rows(plan, handles) == [width, width, min(rows, width)]
    assert max(widths) > 1  # the others still speculate beside it


def test_without_a_limit_every_confident_request_takes_the_widest_rows():
    _, handles, driver = _decoding([None, None, None])
    plan = driver.step(accepted=3)
    assert _rows(plan, handles) == [4, 4, 4]


def test_a_negative_draft_limit_is_refused():
    with pytest.raises(SchedulerError, match="max_drafts = -1"):
        request(16, 8, max_drafts=-1)


def test_device_allocated_rounds_give_a_request_without_drafts_one_row():
    shapes = [prefill(64), spec(4, 1), spec(4, 4, 12, device=True)]
    s = scheduler(shapes, mode=SpeculationMode.ADAPTIVE)
    handles = [
        s.admit(request(16, 400, acceptance_prior=CONFIDENT, max_drafts=m)) for m in (None, None, 0)
    ]
    driver = Driver(s)
    while not all(s.requests[h].is_decoder for h in handles):
        driver.step()
    for _ in range(5):
        plan = driver.step(accepted=3)
        lanes = {lane.handle: lane for lane in plan.lanes}
        limited = lanes.get(handles[2])
        if limited is not None:
            assert limited.query_length == 1 and limited.max_advance_tokens <= 1
    assert any(lane.query_length > 1 for lane in plan.lanes)


def test_a_request_whose_drafts_the_runtime_reports_is_planned_by_the_latest_count():
    """A grammar-constrained request verifies the drafts its grammar forces: the runtime
    reports their count after each frame (limit_drafts) and Helios plans by it."""
    s, handles, driver = _decoding([None, None, 0])
    assert _rows(driver.step(accepted=3), handles)[2] in (None, 1)
    s.limit_drafts(handles[2], 3)
    plan = driver.step(accepted=3)
    assert _rows(plan, handles)[2] == min(4, plan.descriptor.token_capacity) > 1
    s.limit_drafts(handles[2], 0)
    assert _rows(driver.step(accepted=3), handles)[2] in (None, 1)


def test_a_frame_serving_a_grammar_request_needs_completion_feedback():
    """The host computes its masks and drafts from every token before them (the seed's
    grammar rule): nothing is queued behind its frame."""
    s = scheduler(SHAPES, mode=SpeculationMode.FIXED)
    handle = s.admit(request(16, 400, acceptance_prior=CONFIDENT, grammar=True))
    driver = Driver(s)
    while not s.requests[handle].is_decoder:
        driver.step()
    plan = s.plan()
    s.commit(plan, Fence(driver.fence + 1))
    assert "completion feedback" in s.queue.why_closed()
    assert s.plan() is None
