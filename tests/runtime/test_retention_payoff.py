"""Retention pays only where it saves prefill launches (runtime/retention/payoff.py,
docs/scheduling.md): restores and captures whose saved prefill time is below their cost
are skipped; unknown costs and preemption resumes keep them."""

from __future__ import annotations

import pytest

from ignition.runtime.retention.captures import CaptureCosts, CheckpointRole
from ignition.runtime.retention.checkpoints import CheckpointCache
from ignition.runtime.retention.payoff import (
    LatestMessage,
    PrefillEstimate,
    capture_pays,
    latest_message,
    restore_pays,
)
from ignition.runtime.retention.snapshot_rows import RowState

MS = 1e6
# The H200 MoE roofline's prefill graphs (simulate/devices.py): weight-bound launches.
ROOFLINE = PrefillEstimate.of(
    [(128, 49.57 * MS), (256, 53.45 * MS), (1536, 53.79 * MS), (4096, 63.76 * MS)]
)
# A compute-bound device (the CPU): time grows with the tokens.
LINEAR = PrefillEstimate.of([(64, 6.4 * MS), (256, 25.6 * MS), (1024, 102.4 * MS)])
COPY = 0.33 * MS


def _costs(prefill: PrefillEstimate | None) -> CaptureCosts:
    return CaptureCosts(0.0156 * MS, 49.57 * MS, COPY, prefill, COPY)


def _retained(cache: CheckpointCache, tokens: tuple[int, ...]) -> int:
    dest = cache.rows.arm(tokens, CheckpointRole.TERMINAL, "earlier", 1)
    assert dest is not None
    cache.rows.begin_copy(dest.row)
    cache.copy_done(dest.row, ok=True)
    return dest.row


def test_the_prefill_estimate_covers_whole_launches_of_the_cheapest_per_token_graph_then_the_rest():
    assert ROOFLINE.ns(130) == 53.45 * MS  # the fastest graph holding 130 tokens
    assert ROOFLINE.ns(1217) == 53.79 * MS
    # one 4096-token launch, then 1154 tokens in a 1536-token one
    assert ROOFLINE.ns(5250) == pytest.approx((63.76 + 53.79) * MS)
    assert ROOFLINE.ns(0) == 0.0
    assert LINEAR.ns(1088) == pytest.approx((102.4 + 6.4) * MS)  # 1024, then 64 in the 64


def test_a_restore_that_saves_no_prefill_launch_does_not_pay_and_one_that_saves_a_launch_does():
    # table D's second turn: 1087 restored of 1217 saves 0.34 ms of one weight-bound launch
    assert not restore_pays(ROOFLINE, 1217, 1087, COPY, 0.05)
    # table E's third turn: 3200 restored of 5250 saves a whole launch
    assert restore_pays(ROOFLINE, 5250, 3200, COPY, 0.05)
    # compute-bound: the same short history saves most of its prefill
    assert restore_pays(LINEAR, 1217, 1087, COPY, 0.05)


def test_unknown_costs_keep_every_restore_and_capture():
    assert restore_pays(None, 1217, 1087, COPY, 0.05)
    assert restore_pays(ROOFLINE, 1217, 1087, None, 0.05)
    assert capture_pays(ROOFLINE, 1280, 1410, None, COPY, 0.05)
    assert capture_pays(ROOFLINE, 1280, None, COPY, COPY, 0.05)  # no predicted next prompt


def test_the_predicted_next_message_is_the_latest_message_with_the_generation_prompt():
    assert latest_message([1022, 1089, 1215], 1217) == LatestMessage(128, is_only=False)
    assert latest_message([1022], 1024) == LatestMessage(1024, is_only=True)
    assert latest_message([], 1024) is None


def test_a_one_message_prompt_is_predicted_by_the_median_of_recent_later_messages():
    """A first turn's own length says nothing of the next message (table E: 1024-token
    first prompts, 2048-token turns); with no later turn seen yet its captures are kept."""
    cache = CheckpointCache(8)
    first = tuple(range(100, 1124))
    cache.admit("t0", first, [1022], _costs(ROOFLINE), now_ns=1, max_output=64)
    assert cache.requests["t0"].next_message is None
    for i, size in enumerate((2048, 2048, 130)):
        later = tuple(range(10_000 * (i + 1), 10_000 * (i + 1) + 1089 + size))
        cache.admit(f"t1-{i}", later, [1022, 1089, 1087 + size], _costs(ROOFLINE), 2)
    assert cache.next_messages.predict() == 2048
    cache.admit("t0b", first, [1022], _costs(ROOFLINE), now_ns=3, max_output=64)
    assert cache.requests["t0b"].next_message == 2048


def test_an_unprofitable_restore_is_skipped_and_pins_no_row():
    cache = CheckpointCache(4)
    history = tuple(range(100, 1187))
    row = _retained(cache, history)
    prompt = (*history, *range(5000, 5130))
    admission = cache.admit("turn", prompt, [1022, 1087, 1215], _costs(ROOFLINE), now_ns=2)
    assert admission.restore_tokens == 0
    assert cache.rows.rows[row].readers == 0 and cache.counters.hits == 0
    assert cache.counters.unprofitable_restores == 1


def test_a_restore_that_saves_a_launch_is_kept():
    cache = CheckpointCache(4)
    history = tuple(range(100, 3300))
    _retained(cache, history)
    prompt = (*history, *range(5000, 7050))
    admission = cache.admit("turn", prompt, [3200, 5248], _costs(ROOFLINE), now_ns=2)
    assert admission.restore_tokens == len(history)


@pytest.mark.parametrize(("payoff", "mandatory"), [(False, False), (True, True)])
def test_without_the_rule_or_for_a_preemption_resume_every_match_is_restored(payoff, mandatory):
    cache = CheckpointCache(4, payoff=payoff)
    history = tuple(range(100, 1187))
    _retained(cache, history)
    prompt = (*history, *range(5000, 5130))
    admission = cache.admit(
        "turn", prompt, [1022, 1087, 1215], _costs(ROOFLINE), now_ns=2, mandatory=mandatory
    )
    assert admission.restore_tokens == len(history)


def test_a_capture_that_would_not_pay_for_the_predicted_next_prompt_is_skipped_and_guards_no_row():
    cache = CheckpointCache(4)
    prompt = tuple(range(100, 1317))  # an earlier exchange, then a 128-token message
    admission = cache.admit(
        "turn", prompt, [1022, 1089, 1215], _costs(ROOFLINE), now_ns=2, max_output=64
    )
    assert admission.capture_ends == ()
    assert all(r.guard_owner is None for r in cache.rows.rows)
    # nor is its terminal capture, whatever its decode earned
    cache.earn_decode("turn", 10**12)
    assert not cache.arm_terminal("turn", prompt + tuple(range(63)), COPY, now_ns=3)
    assert cache.rows.count(RowState.ARMED) == 0
    assert cache.counters.unprofitable_captures == 2  # the prompt-end anchor, the terminal


def test_a_capture_whose_restore_would_save_a_launch_is_kept():
    cache = CheckpointCache(4)
    prompt = tuple(range(100, 3237))  # the next turn re-sends it and adds ~2048 tokens
    admission = cache.admit(
        "turn", prompt, [1022, 1089, 3135], _costs(ROOFLINE), now_ns=2, max_output=64
    )
    assert admission.capture_ends == (len(prompt),)
    cache.earn_decode("turn", 10**12)
    assert cache.arm_terminal("turn", prompt + tuple(range(63)), COPY, now_ns=3)
