"""Checkpoint retention: anchors and the request-local extra-work allowance
(design: "Planning and the execution queue", checkpoint retention)."""

from __future__ import annotations

import math

import pytest

from ignition.runtime.retention.captures import (
    CaptureCosts,
    CheckpointAllowance,
    CheckpointRole,
    conversation_anchors,
    plan_captures,
)

KNOWN = CaptureCosts(prefill_ns_per_token=1000.0, split_ns=500.0, snapshot_ns=700.0)


def test_last_eligible_completed_message_is_the_anchor_then_earlier_then_prompt_end():
    points = conversation_anchors([10, 40, 25], prompt_len=50)
    assert [(p.end, p.role) for p in points] == [
        (40, CheckpointRole.ANCHOR),
        (25, CheckpointRole.EARLIER_MESSAGE),
        (10, CheckpointRole.EARLIER_MESSAGE),
        (50, CheckpointRole.PROMPT_END),
    ]
    assert [p.is_extra for p in points] == [False, True, True, True]


def test_prompt_end_substitutes_when_no_message_is_eligible():
    points = conversation_anchors([0, 50], prompt_len=50)
    assert [(p.end, p.role, p.is_extra) for p in points] == [(50, CheckpointRole.ANCHOR, False)]


def test_extras_fit_the_request_local_allowance():
    """Extra prefill splits and snapshot copies fit fraction * estimated uncached prefill."""
    # 100 uncached tokens * 1000 ns * 0.05 = 5000 ns; the anchor (split + copy) costs 1200,
    # the prompt end (copy only) 700, each earlier message (split + copy) 1200.
    allowance = plan_captures([20, 40, 60, 80], 100, 0, KNOWN, fraction=0.05)
    assert allowance.budget_ns == pytest.approx(5000.0)
    ends = [p.end for p in allowance.points]
    assert 80 in ends  # the anchor
    assert allowance.spent_ns <= allowance.budget_ns
    # 1200 (anchor) + 1200 (60) + 1200 (40) = 3600; 20 would reach 4800, then the prompt
    # end 5500 does not fit.
    assert ends == [20, 40, 60, 80]
    assert allowance.spent_ns == pytest.approx(4800.0)


def test_allowance_scales_with_uncached_work_only():
    """A restored prefix is not uncached work: the allowance shrinks with it."""
    fresh = plan_captures([60], 100, 0, KNOWN, fraction=0.05)
    restored = plan_captures([60], 100, 60, KNOWN, fraction=0.05)
    assert restored.budget_ns == pytest.approx(fresh.budget_ns * 0.4)
    assert all(p.end > 60 for p in restored.points)


def test_unknown_costs_disable_extras_but_keep_the_anchor():
    unknown = CaptureCosts(prefill_ns_per_token=None, split_ns=500.0, snapshot_ns=700.0)
    allowance = plan_captures([20, 40], 100, 0, unknown)
    assert [(p.end, p.role) for p in allowance.points] == [(40, CheckpointRole.ANCHOR)]
    assert not allowance.try_spend(1.0)


def test_zero_fraction_keeps_only_the_anchor_at_the_prompt_end():
    """With no allowance the message-end anchor's prefill cut is unaffordable: the prompt
    end, where prefill stops anyway, substitutes as the anchor (its copy is never refused)."""
    allowance = plan_captures([20, 40], 100, 0, KNOWN, fraction=0.0)
    assert [(p.end, p.role) for p in allowance.points] == [(100, CheckpointRole.ANCHOR)]


def test_an_anchor_cut_that_does_not_fit_the_allowance_moves_the_anchor_to_the_prompt_end():
    """Additional prefill splits fit the allowance; a cut costing a whole small-prefill
    launch on a short prompt does not, so the checkpoint is taken where prefill ends."""
    costly = CaptureCosts(prefill_ns_per_token=1000.0, split_ns=40_000.0, snapshot_ns=700.0)
    allowance = plan_captures([20, 98], 100, 0, costly, fraction=0.05)
    assert [(p.end, p.role) for p in allowance.points] == [(100, CheckpointRole.ANCHOR)]
    assert allowance.spent_ns == pytest.approx(700.0)  # the copy only, no cut


def test_an_affordable_anchor_cut_keeps_the_anchor_at_the_message_end():
    allowance = plan_captures([98], 100, 0, KNOWN, fraction=0.05)
    assert (allowance.points[0].end, allowance.points[0].role) == (98, CheckpointRole.ANCHOR)


def test_completed_decode_earns_the_fraction_for_one_distinct_terminal_capture():
    allowance = CheckpointAllowance(0.05)
    assert not allowance.try_terminal(700.0)
    allowance.earn_decode(10_000)  # 500 ns earned
    assert not allowance.try_terminal(700.0)
    allowance.earn_decode(10_000)
    assert allowance.try_terminal(700.0)
    allowance.earn_decode(1_000_000)
    assert not allowance.try_terminal(700.0)  # one distinct terminal capture


def test_terminal_capture_with_unknown_snapshot_cost_is_refused():
    allowance = CheckpointAllowance(0.05)
    allowance.earn_decode(10**9)
    assert not allowance.try_terminal(None)


@pytest.mark.parametrize("bad", [-0.1, math.nan, math.inf])
def test_bad_fraction_names_the_setting(bad):
    with pytest.raises(ValueError, match="scheduler_checkpoint_extra_work_fraction"):
        CheckpointAllowance(bad)
