"""Funded timing refresh (design: "Funded timing refresh"), one sentence per test."""

from __future__ import annotations

import pytest
from exploration_helpers import (
    DISCOVERY,
    LEARNING,
    MS,
    ORDINARY,
    REFRESH,
    Runner,
    run_until_full_refresh_credit,
    stale_alternative_setup,
)
from helios_helpers import decode, prefill, records_for, request, scheduler, spec

from ignition.helios import (
    CompletionReport,
    ExecutionTiming,
    Fence,
    PolicyConfig,
    SchedulerError,
    SelectionReason,
)
from ignition.helios.decide.refresh import CREDIT_CAP_NS, choose_refresh, timing_refresh_ledger
from ignition.helios.decide.utility import Candidate, Decision
from ignition.helios.state.cost import CostModel, Freshness


def test_ordinary_valid_completions_earn_0_002_over_0_998_of_their_isolated_duration():
    s = scheduler([prefill(64), decode(1)])
    s.admit(request(64))
    plan = s.plan()
    s.commit(plan, Fence(1))
    # isolated: the larger of the device interval and the wall interval is credited
    s.complete(Fence(1), CompletionReport(records_for(plan), ExecutionTiming(2 * MS, 3 * MS)))
    assert s.refresh.balance_ns == pytest.approx(3 * MS * 0.002 / 0.998)


def test_queued_executions_are_credited_their_device_interval_only():
    s = scheduler([prefill(64), decode(1)])
    runner = Runner(s)
    runner.decoding(1)
    before = s.refresh.balance_ns
    first = s.plan()
    f1 = runner.commit(first)
    second = s.plan()
    f2 = runner.commit(second)  # the second frame slot: both frames are now queued
    runner.finish(first, f1, ExecutionTiming(2 * MS, 7 * MS))
    runner.finish(second, f2, ExecutionTiming(2 * MS, 7 * MS))
    assert s.refresh.balance_ns - before == pytest.approx(2 * 2 * MS * 0.002 / 0.998)


def test_invalid_timings_earn_no_credit():
    ledger = timing_refresh_ledger()
    s = scheduler([prefill(64), decode(1)])
    s.admit(request(64))
    plan = s.plan()
    s.commit(plan, Fence(1))
    s.complete(Fence(1), CompletionReport(records_for(plan), ExecutionTiming(0, 3 * MS)))
    assert s.refresh.balance == ledger.balance == 0


def test_the_balance_is_capped_at_5_ms_and_full_credit_is_that_cap():
    ledger = timing_refresh_ledger()
    ledger.earn(10_000 * MS)
    assert ledger.balance_ns == CREDIT_CAP_NS == 5 * MS
    assert ledger.has_full_credit()


def test_funding_the_first_refresh_takes_2495_ms_of_credited_ordinary_execution():
    ledger = timing_refresh_ledger()
    ledger.earn(2495 * MS - 1)
    assert not ledger.has_full_credit()
    ledger.earn(1)
    assert ledger.has_full_credit()


def test_initial_discovery_earns_no_credit():
    s = scheduler([prefill(64), decode(1)], cost_ms=None)
    s.admit(request(64))
    plan = Runner(s).step(ExecutionTiming(5 * MS, 5 * MS))
    assert plan.execution_class is DISCOVERY
    assert s.refresh.balance == 0 and s.learning.balance == 0
    assert s.execution_totals()["discovery"]["nanoseconds"] == 5 * MS


def test_idle_discards_positive_credit_and_keeps_debt():
    ledger = timing_refresh_ledger()
    ledger.earn(1000 * MS)
    ledger.idle()
    assert ledger.balance == 0
    ledger.earn(2495 * MS)
    ledger.open(1)
    ledger.close(1, 30 * MS)
    debt = ledger.balance
    assert debt < 0
    ledger.idle()
    assert ledger.balance == debt


def test_the_scheduler_goes_idle_when_nothing_is_submitted_or_live():
    s = scheduler([prefill(64), decode(1)])
    h = s.admit(request(64, output=1))
    Runner(s).step(ExecutionTiming(100 * MS, 100 * MS))
    assert h not in s.requests  # finished by its output limit
    assert s.refresh.balance == 0 and s.learning.balance == 0


def test_repeated_short_busy_periods_separated_by_idle_never_fund_a_refresh():
    ledger = timing_refresh_ledger()
    for _ in range(10):
        ledger.earn(2000 * MS)
        assert not ledger.has_full_credit()
        ledger.idle()


def test_full_credit_lets_one_stale_alternative_displace_the_ordinary_measured_winner():
    s, runner = stale_alternative_setup()
    run_until_full_refresh_credit(s, runner)
    ordinary = s.plan()
    assert ordinary.execution_class is REFRESH
    assert ordinary.descriptor == decode(1) and ordinary.reason is SelectionReason.STALE
    assert ordinary.requires_empty_window
    assert ordinary.exploration_credit == pytest.approx(5 * MS)


def test_without_full_credit_the_ordinary_winner_runs_even_with_stale_alternatives():
    s, runner = stale_alternative_setup(ttl_ms=200.0)
    for _ in range(5):
        runner.step()
    assert s.costs.freshness(decode(1), s.now_ns) is Freshness.STALE
    assert not s.refresh.has_full_credit()
    plan = s.plan()
    assert plan.execution_class is ORDINARY and plan.descriptor == decode(2)


def test_a_refresh_episode_pays_its_actual_duration_once_and_the_trace_shows_it():
    s, runner = stale_alternative_setup()
    run_until_full_refresh_credit(s, runner)
    plan = s.plan()
    fence = runner.commit(plan)
    assert s.trace[-1].execution_class == "timing_refresh"
    runner.finish(plan, fence, ExecutionTiming(70 * MS, 72 * MS))
    assert s.refresh.spent_ns == 72 * MS and s.refresh.episodes == 1
    assert s.refresh.balance_ns == pytest.approx(5 * MS - 72 * MS)
    entry = next(e for e in s.trace if e.fence == fence)
    assert entry.credit_spent_ns == 72 * MS and entry.exploration_credit == pytest.approx(5 * MS)
    assert s.costs.freshness(decode(1), s.now_ns) is Freshness.FRESH


def test_the_next_episode_needs_full_credit_after_the_previous_one_closes():
    s, runner = stale_alternative_setup()
    run_until_full_refresh_credit(s, runner)
    runner.step()  # the refresh of decode(1)
    for _ in range(10):
        assert runner.step().execution_class is ORDINARY
    assert not s.refresh.can_open()


def test_attempts_advance_only_on_committed_execution():
    s, runner = stale_alternative_setup()
    run_until_full_refresh_credit(s, runner)
    before = s.costs.entry(decode(1)).last_attempt_ns
    plan = s.plan()
    s.plan()
    assert s.costs.entry(decode(1)).last_attempt_ns == before
    runner.commit(plan)
    assert s.costs.entry(decode(1)).last_attempt_ns == s.now_ns


def test_an_invalid_timing_leaves_the_estimate_stale_and_its_wall_time_pays():
    s, runner = stale_alternative_setup()
    run_until_full_refresh_credit(s, runner)
    plan = s.plan()
    fence = runner.commit(plan)
    runner.finish(plan, fence, ExecutionTiming(0, 9 * MS))
    assert s.costs.freshness(decode(1), s.now_ns) is Freshness.STALE
    assert s.refresh.spent_ns == 9 * MS and s.refresh.last_episode_ns == 9 * MS


def test_ordinary_winners_refresh_through_normal_service_without_spending_credit():
    policy = PolicyConfig(estimate_ttl_ns=50 * MS)
    s = scheduler([prefill(64), decode(1)], {prefill(64): 1.0, decode(1): 80.0}, policy=policy)
    runner = Runner(s)
    runner.decoding(1)
    s.refresh.earn(2495 * MS)  # full credit, and no alternative to decode(1)
    runner.wait(100 * MS)
    assert s.costs.freshness(decode(1), s.now_ns) is Freshness.STALE
    plan = runner.step()
    assert plan.execution_class is ORDINARY and plan.reason is SelectionReason.STALE
    assert s.refresh.spent_ns == 0 and s.refresh.has_full_credit()
    assert s.costs.freshness(decode(1), s.now_ns) is Freshness.FRESH


def test_a_refresh_requires_an_empty_queue_and_completion_feedback():
    s, runner = stale_alternative_setup()
    for _ in range(100):
        if s.refresh.has_full_credit():
            break
        first = s.plan()
        f1 = runner.commit(first)
        second = s.plan()
        if second is None:
            runner.finish(first, f1)
            continue
        f2 = runner.commit(second)
        runner.finish(first, f1)
        if s.refresh.has_full_credit():
            # the refresh wins but waits: nothing is queued behind the frame in flight
            assert s.plan() is None
            runner.finish(second, f2)
            plan = s.plan()
            assert plan.execution_class is REFRESH
            runner.commit(plan)
            assert s.plan() is None  # and nothing joins it before its feedback
            return
        runner.finish(second, f2)
    raise AssertionError("refresh credit never became full")


def test_commit_rejects_a_second_refresh_from_the_same_decision():
    s, runner = stale_alternative_setup()
    run_until_full_refresh_credit(s, runner)
    plan = s.plan()
    fence = runner.commit(plan)
    runner.finish(plan, fence)
    with pytest.raises(SchedulerError, match="full credit"):
        s.commit(plan, Fence(fence + 1))


def test_cancellation_suppresses_publication_without_inventing_a_timing_observation():
    s, runner = stale_alternative_setup()
    run_until_full_refresh_credit(s, runner)
    plan = s.plan()
    fence = runner.commit(plan)
    for lane in plan.lanes:
        s.cancel(lane.handle)
    runner.wait(4 * MS)
    records = [type(r)(r.handle) for r in records_for(plan)]
    tokens = s.complete(Fence(fence), CompletionReport(records, ExecutionTiming(0, 4 * MS)))
    assert tokens == []
    assert s.costs.freshness(decode(1), s.now_ns) is Freshness.STALE
    assert s.refresh.episodes == 1 and s.refresh.spent_ns == 4 * MS


def test_a_funded_speculative_refresh_pays_one_complete_program_and_never_learning():
    costs = {prefill(64): 1.0, decode(2): 100.0, spec(2, 3): 300.0}
    policy = PolicyConfig(estimate_ttl_ns=1000 * MS)
    s = scheduler([prefill(64), decode(2), spec(2, 3)], costs, policy=policy)
    runner = Runner(s)
    runner.decoding(2, acceptance_prior=(0.0, 0.0))
    s.learning.balance = -(10**18)  # no probes in this test: only the refresh ledger
    run_until_full_refresh_credit(s, runner)
    plan = s.plan()
    assert plan.execution_class is REFRESH and plan.descriptor == spec(2, 3)
    learning_before = s.learning.balance
    fence = runner.commit(plan)
    runner.finish(plan, fence, ExecutionTiming(290 * MS, 295 * MS), accepted=2)
    assert s.refresh.spent_ns == 295 * MS
    assert s.learning.balance == learning_before and s.learning.spent_ns == 0
    totals = s.execution_totals()
    assert totals["timing_refresh"]["executions"] == 1
    assert totals["acceptance_learning"]["executions"] == 0


def _candidate(d, score, freshness=Freshness.STALE):
    c = Candidate(d, MS, freshness, score, 1, (d.name,), lambda: ([], -1))
    c.score = score
    return c


def test_stale_alternatives_go_oldest_first_by_the_later_of_observation_and_attempt():
    costs = CostModel(ttl_ns=10 * MS)
    winner = _candidate(decode(8), 9.0, Freshness.FRESH)
    a, b, c = (_candidate(decode(n), v) for n, v in ((1, 1.0), (2, 5.0), (4, 3.0)))
    costs.seed(decode(1), MS, now_ns=0)
    costs.seed(decode(2), MS, now_ns=0)
    costs.seed(decode(4), MS, now_ns=0)
    costs.note_attempt(decode(2), 5 * MS)  # attempted later: decode(2) waits its turn
    assert choose_refresh(winner, [winner, a, b, c], costs) is c  # equal times: higher value
    costs.note_attempt(decode(4), 6 * MS)
    assert choose_refresh(winner, [winner, a, b, c], costs) is a


def test_with_refresh_could_win_only_an_alternative_that_could_beat_the_winner_runs():
    costs = CostModel(ttl_ns=10 * MS)
    winner = _candidate(decode(8), 9.0, Freshness.FRESH)
    slow, fast = _candidate(decode(1), 5.0), _candidate(decode(2), 5.0)
    costs.seed(decode(1), MS, now_ns=0)  # the older: the seed's rule refreshes it first
    costs.seed(decode(2), MS, now_ns=MS)
    costs.entry(decode(2)).samples.appendleft(MS // 2)  # once ran in half: 10 per ms > 9
    could_win = Decision(0.0, 0, 0.0, 0.0, refresh_could_win=True)
    assert choose_refresh(winner, [winner, slow, fast], costs) is slow
    assert choose_refresh(winner, [winner, slow, fast], costs, could_win) is fast
    assert choose_refresh(winner, [winner, slow], costs, could_win) is None
    seeds_rule = Decision(0.0, 0, 0.0, 0.0)  # the flag off: any stale alternative
    assert choose_refresh(winner, [winner, slow, fast], costs, seeds_rule) is slow


def test_an_unknown_winner_is_discovery_and_no_refresh_displaces_it():
    costs = CostModel(ttl_ns=10 * MS)
    costs.seed(decode(1), MS, now_ns=0)
    unknown = _candidate(decode(2), 1.0, Freshness.UNKNOWN)
    assert choose_refresh(unknown, [unknown, _candidate(decode(1), 1.0)], costs) is None


def test_refresh_and_learning_are_distinct_classes_in_the_totals():
    s, runner = stale_alternative_setup()
    run_until_full_refresh_credit(s, runner)
    runner.step()
    totals = s.execution_totals()
    assert set(totals) == {"ordinary", "discovery", "timing_refresh", "acceptance_learning"}
    assert totals["timing_refresh"]["episodes"] == 1
    assert totals[LEARNING.value]["episodes"] == 0
    assert totals["ordinary"]["nanoseconds"] == s.refresh.ordinary_ns
