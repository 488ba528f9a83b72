"""Helios chooses a request's proposal source per round (issue 28, "both"): the runtime
offers what each source can supply after every frame (Scheduler.offer_drafts), the
round's source is the one whose expected output is larger at the width both can fill
(decide/sources.py), its lanes carry it, and only that source learns from the round."""

from __future__ import annotations

import pytest
from helios_helpers import Driver, prefill, request, scheduler, spec

from ignition.helios import DraftSource, SchedulerError
from ignition.helios.config import SpeculationMode
from ignition.helios.decide.sources import choose_source, usable_offers
from ignition.helios.state.acceptance import AcceptanceTracker, SourcePriors

SHAPES = [prefill(64), spec(4, 1), spec(4, 4)]
MTP, NGRAM = DraftSource("mtp"), DraftSource("ngram")
BOTH = (MTP, NGRAM)


def choosing(**kw):
    return request(16, 400, proposal_choices=BOTH, host_drafts=True, **kw)


def _tracker(**observed: tuple[float, ...]) -> AcceptanceTracker:
    """A request's tracker whose sources each saw 60 rounds of the given survivals."""
    tracker = AcceptanceTracker(SourcePriors())
    for source, survival in observed.items():
        for _ in range(60):
            tracker.observe_round(
                DraftSource(source),
                num_offered_drafts=len(survival),
                num_accepted_drafts=0,
                is_terminated=False,
                survival=survival,
            )
    return tracker


def test_a_long_accepted_copy_wins_over_weaker_learned_drafts():
    tracker = _tracker(mtp=(0.5, 0.3, 0.2), ngram=(0.9, 0.85, 0.8))
    assert choose_source(tracker, {MTP: None, NGRAM: 3}, BOTH, 3, 1.0) == NGRAM


def test_no_copy_found_means_learned_drafts():
    tracker = _tracker(mtp=(0.1, 0.05, 0.0), ngram=(0.99, 0.99, 0.99))
    assert choose_source(tracker, {MTP: None, NGRAM: 0}, BOTH, 3, 1.0) == MTP


def test_sources_are_compared_at_the_width_both_can_fill():
    """One copied draft at 0.9 against learned 0.6 per position: at one draft the copy
    is worth 1.9 tokens against 1.6, though three learned drafts would give 2.2+."""
    tracker = _tracker(mtp=(0.6, 0.6, 0.6), ngram=(0.9, 0.9, 0.9))
    assert choose_source(tracker, {MTP: None, NGRAM: 1}, BOTH, 3, 1.0) == NGRAM
    assert usable_offers({MTP: None, NGRAM: 1}, BOTH, 3) == {MTP: 3, NGRAM: 1}
    # the same copy, poorly accepted so far, loses at that width
    tracker = _tracker(mtp=(0.6, 0.6, 0.6), ngram=(0.3, 0.3, 0.3))
    assert choose_source(tracker, {MTP: None, NGRAM: 1}, BOTH, 3, 1.0) == MTP


def test_a_source_tried_little_is_tried_again_before_it_is_written_off():
    """A copy source with two observations at 0.4 against a learned source observed 60
    times at 0.5: its bounded optimistic estimate (the probe bound) wins the round."""
    tracker = _tracker(mtp=(0.5,))
    for _ in range(2):
        tracker.observe_round(
            NGRAM,
            num_offered_drafts=1,
            num_accepted_drafts=0,
            is_terminated=False,
            survival=(0.4,),
        )
    assert choose_source(tracker, {MTP: None, NGRAM: 1}, BOTH, 1, 1.0) == NGRAM


def test_ties_go_to_the_first_choice():
    tracker = AcceptanceTracker(SourcePriors())  # both at the same fresh prior
    assert choose_source(tracker, {MTP: None, NGRAM: 2}, BOTH, 3, 1.0) == MTP
    assert choose_source(tracker, {MTP: None, NGRAM: 2}, BOTH[::-1], 3, 1.0) == NGRAM


def _decoding(s):
    h = s.admit(choosing())
    driver = Driver(s)
    while not s.requests[h].is_decoder:
        driver.step()
    return h, driver


def _teach(s, h, source: str, survival: tuple[float, ...]) -> None:
    for _ in range(60):
        s.requests[h].acceptance.observe_round(
            source,
            num_offered_drafts=len(survival),
            num_accepted_drafts=0,
            is_terminated=False,
            survival=survival,
        )


def test_the_offer_sets_the_rounds_source_and_its_draft_limit():
    s = scheduler(SHAPES, mode=SpeculationMode.FIXED)
    h, _ = _decoding(s)
    _teach(s, h, NGRAM, (0.95, 0.95, 0.95))
    _teach(s, h, MTP, (0.3, 0.1, 0.05))
    assert s.offer_drafts(h, {MTP: None, NGRAM: 2}) == NGRAM
    assert (s.requests[h].spec.proposal_source, s.requests[h].spec.max_drafts) == (NGRAM, 2)
    plan = s.plan()
    lane = next(lane for lane in plan.lanes if lane.handle == h)
    assert lane.proposal_source == NGRAM and lane.query_length <= 3
    # no copy next round: the learned head drafts as deep as the programs hold
    assert s.offer_drafts(h, {MTP: None, NGRAM: 0}) == MTP
    assert (s.requests[h].spec.proposal_source, s.requests[h].spec.max_drafts) == (MTP, None)


def test_a_round_teaches_the_source_its_lane_carried_and_no_other():
    s = scheduler(SHAPES, mode=SpeculationMode.FIXED)
    h, driver = _decoding(s)
    _teach(s, h, NGRAM, (0.95, 0.95, 0.95))
    learned = s.requests[h].acceptance.history(MTP)
    before = ([learned.weight(d) for d in (1, 2, 3)], learned.survivals(3))
    copied = s.requests[h].acceptance.history(NGRAM).survivals(3)[0]
    for _ in range(4):
        assert s.offer_drafts(h, {MTP: None, NGRAM: 3}) == NGRAM
        plan = driver.step(accepted=3)
        assert any(lane.query_length > 1 and lane.proposal_source == NGRAM for lane in plan.lanes)
    assert ([learned.weight(d) for d in (1, 2, 3)], learned.survivals(3)) == before
    # the copy source saw its first drafts accepted: its estimate rose
    assert s.requests[h].acceptance.history(NGRAM).survivals(3)[0] > copied


def test_a_choosing_request_keeps_one_stream_family_whichever_source_it_picks():
    s = scheduler(SHAPES, mode=SpeculationMode.FIXED)
    h, _ = _decoding(s)
    families = set()
    for copy in (0, 3, 0):
        s.offer_drafts(h, {MTP: None, NGRAM: copy})
        families.add(s.requests[h].spec.family)
    assert families == {"mtp+ngram"}
    assert request(16, 40).family == "mtp"


def test_offers_for_requests_without_choices_or_from_unknown_sources_are_refused():
    s = scheduler(SHAPES, mode=SpeculationMode.FIXED)
    plain = s.admit(request(16, 40))
    with pytest.raises(SchedulerError, match="no proposal_choices"):
        s.offer_drafts(plain, {MTP: None})
    h = s.admit(choosing())
    with pytest.raises(SchedulerError, match=r"\['draft'\] are not among its choices"):
        s.offer_drafts(h, {DraftSource("draft"): 3})
    with pytest.raises(SchedulerError, match="proposal_choices"):
        request(16, 40, proposal_choices=(NGRAM,))  # proposal_source "mtp" is not a choice
    with pytest.raises(SchedulerError, match="distinct"):
        request(16, 40, proposal_choices=(MTP, MTP))
