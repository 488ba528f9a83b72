"""Each request tracks acceptance by source (the seed): rounds that verify copies of the
context ("ngram") teach the copy source's history and population prior, never the learned
("mtp") source's; and a request whose drafts the host copies needs completion feedback."""

from __future__ import annotations

from helios_helpers import Driver, prefill, request, scheduler, spec

from ignition.helios import DraftSource, Fence
from ignition.helios.config import SpeculationMode

SHAPES = [prefill(64), spec(4, 1), spec(4, 4)]
FRESH = (0.5, 0.25, 0.125)  # the population prior before any observation

MTP, NGRAM = DraftSource("mtp"), DraftSource("ngram")


def copying(**kw):
    return request(16, 400, proposal_source=NGRAM, host_drafts=True, max_drafts=3, **kw)


def _served_copies(rounds: int = 6):
    """A scheduler whose one copying request verified copies that were all accepted."""
    s = scheduler(SHAPES, mode=SpeculationMode.FIXED)
    h = s.admit(copying())
    driver = Driver(s)
    while not s.requests[h].is_decoder:
        driver.step()
    served = 0
    while served < rounds:
        plan = driver.step(accepted=3)
        served += any(lane.query_length > 1 for lane in plan.lanes)
    return s, h


def test_copy_observations_teach_the_copy_source():
    s, h = _served_copies()
    assert s.requests[h].acceptance.history(NGRAM).survivals(3)[0] > FRESH[0]


def test_copy_observations_leave_the_requests_learned_history_alone():
    s, h = _served_copies()
    learned = s.requests[h].acceptance.history(MTP)
    assert learned.survivals(3) == FRESH
    assert [learned.weight(d) for d in (1, 2, 3)] == [2.0, 2.0, 2.0]


def test_a_learned_request_admitted_after_copies_starts_at_the_untouched_prior():
    s, _ = _served_copies()
    later = s.admit(request(16, 400))
    assert s.requests[later].acceptance.history(MTP).survivals(3) == FRESH
    assert s.requests[later].forecast.means(3) == FRESH


def test_a_copying_request_admitted_later_starts_from_the_copy_population():
    s, _ = _served_copies()
    later = s.admit(copying())
    assert s.requests[later].acceptance.history(NGRAM).survivals(3)[0] > FRESH[0]


def _committed_first_decode(shapes):
    s = scheduler(shapes, mode=SpeculationMode.FIXED)
    h = s.admit(copying())
    driver = Driver(s)
    while not s.requests[h].is_decoder:
        driver.step()
    plan = s.plan()
    s.commit(plan, Fence(driver.fence + 1))
    return s, plan


def test_a_round_verifying_a_copying_requests_drafts_waits_for_completion_feedback():
    """The host copies the drafts from every token before them."""
    s, plan = _committed_first_decode(SHAPES)
    assert plan.descriptor.proposal_depth > 0
    assert s.plan() is None
    assert "completion feedback" in s.queue.why_closed()


def test_a_copying_requests_frames_without_drafts_pipeline():
    s, plan = _committed_first_decode([prefill(64), spec(4, 1)])
    assert plan.descriptor.proposal_depth == 0
    assert s.queue.why_closed() is None
