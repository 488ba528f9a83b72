"""Funded acceptance learning (design: "Funded acceptance learning"), one sentence per test."""

from __future__ import annotations

import math

import pytest
from exploration_helpers import (
    LEARNING,
    MS,
    ORDINARY,
    REFRESH,
    Runner,
    pessimistic_setup,
    run_until_full_refresh_credit,
)
from helios_helpers import decode, prefill, records_for, request, scheduler, spec

from ignition.helios import (
    HEAD_DRAFTS,
    CompletionRecord,
    CompletionReport,
    ConfidenceSidecar,
    ExecutionTiming,
    Fence,
    PolicyConfig,
    SchedulerError,
)
from ignition.helios.config import SpeculationMode
from ignition.helios.decide.refresh import CREDIT_CAP_NS, acceptance_learning_ledger
from ignition.helios.decide.utility import Candidate
from ignition.helios.fast.learning import Probe, ranks_before
from ignition.helios.state.acceptance import PopulationPrior, PrefixHistory


def until_probe(s, runner, limit: int = 200):
    for _ in range(limit):
        plan = s.plan()
        if plan.execution_class is LEARNING:
            return plan
        assert plan.execution_class is ORDINARY
        runner.finish(plan, runner.commit(plan))
    raise AssertionError("no acceptance probe was selected")


def test_ordinary_completions_earn_a_separate_0_01_over_0_99_share_capped_at_5_ms():
    s = scheduler([prefill(64), decode(1)])
    s.admit(request(64))
    plan = s.plan()
    s.commit(plan, Fence(1))
    s.complete(Fence(1), CompletionReport(records_for(plan), ExecutionTiming(3 * MS, 2 * MS)))
    assert s.learning.balance_ns == pytest.approx(3 * MS * 0.01 / 0.99)
    assert s.refresh.balance_ns == pytest.approx(3 * MS * 0.002 / 0.998)
    ledger = acceptance_learning_ledger()
    ledger.earn(10_000 * MS)
    assert ledger.balance_ns == CREDIT_CAP_NS
    ledger = acceptance_learning_ledger()
    ledger.earn(495 * MS - 1)
    assert not ledger.has_full_credit()
    ledger.earn(1)
    assert ledger.has_full_credit()


def test_full_credit_permits_a_probe_one_depth_beyond_the_ordinary_choice():
    s, runner = pessimistic_setup()
    ordinary = s.plan()
    assert ordinary.descriptor == decode(1)  # the history says drafts never survive
    probe = until_probe(s, runner)
    assert probe.descriptor == spec(1, 3) and probe.lanes[0].query_length >= 2
    assert probe.requires_empty_window
    assert probe.exploration_credit == pytest.approx(5 * MS)
    assert s.trace[-1].execution_class == "ordinary"  # plan() alone commits nothing


def test_the_probe_beats_the_ordinary_choice_only_under_the_optimistic_estimate():
    s, runner = pessimistic_setup()
    probe = until_probe(s, runner)
    ordinary = runner.s  # the same scheduler: re-plan with the learning ledger spent
    s.learning.balance = 0
    assert ordinary.plan().descriptor == decode(1)
    assert probe.selection_value_rate() > ordinary.plan().selection_value_rate()


def test_a_probe_that_cannot_beat_the_ordinary_choice_is_not_offered():
    s, runner = pessimistic_setup(spec_ms=60.0)  # too slow even if every draft survived
    s.learning.earn(10_000 * MS)
    for _ in range(20):
        assert runner.step().execution_class is ORDINARY


def test_a_probe_leaves_future_output_in_which_to_use_the_observation():
    # 3 outputs left: the width-3 probe fits the output limit and would beat the
    # ordinary choice optimistically, but it would end the request, so nothing learns
    s, _ = pessimistic_setup(output=4)
    s.learning.earn(10_000 * MS)
    plan = s.plan()
    assert plan.execution_class is ORDINARY and plan.descriptor == decode(1)
    s, _ = pessimistic_setup(output=5)  # one more output: the probe leaves one to use
    s.learning.earn(10_000 * MS)
    plan = s.plan()
    assert plan.execution_class is LEARNING and plan.lanes[0].query_length == 3


def test_fixed_width_execution_never_probes_acceptance():
    s, runner = pessimistic_setup(mode=SpeculationMode.FIXED)
    s.learning.earn(10_000 * MS)
    for _ in range(20):
        assert runner.step().execution_class is ORDINARY


def test_one_probe_episode_at_a_time():
    s, runner = pessimistic_setup()
    probe = until_probe(s, runner)
    runner.commit(probe)
    assert s.learning.is_open and not s.learning.can_open()
    with pytest.raises(SchedulerError, match="full credit"):
        s.commit(probe, Fence(runner.fence + 1))


def test_an_episode_may_run_into_debt_and_the_next_waits_for_full_credit():
    s, runner = pessimistic_setup()
    probe = until_probe(s, runner)
    fence = runner.commit(probe)
    runner.finish(probe, fence, ExecutionTiming(30 * MS, 31 * MS))
    assert s.learning.balance_ns == pytest.approx(5 * MS - 31 * MS)
    assert s.learning.spent_ns == 31 * MS and s.learning.last_episode_ns == 31 * MS
    # (31 - 5 + 5) ms of debt and refill at 1/99 take 3069 ms of ordinary execution
    for _ in range(10):
        assert runner.step().execution_class is ORDINARY


def test_an_episode_pays_one_complete_graph_interval_including_readiness_stalls():
    s, runner = pessimistic_setup()
    probe = until_probe(s, runner)
    fence = runner.commit(probe)
    timing = ExecutionTiming(device_ns=22 * MS, wall_ns=21 * MS, readiness_stall_ns=4 * MS)
    runner.finish(probe, fence, timing)
    assert s.learning.spent_ns == 22 * MS  # raw physical time pays
    assert s.costs.estimate_ns(spec(1, 3)) != 22 * MS
    entry = next(e for e in s.trace if e.fence == fence)
    assert entry.execution_class == "acceptance_learning" and entry.credit_spent_ns == 22 * MS


def test_cost_estimates_stay_median_replay_durations_corrected_for_readiness_stalls():
    s = scheduler([prefill(64), decode(1)], cost_ms=None)
    s.admit(request(64))
    plan = s.plan()
    s.commit(plan, Fence(1))
    s.complete(
        Fence(1), CompletionReport(records_for(plan), ExecutionTiming(10 * MS, 10 * MS, 3 * MS))
    )
    assert s.costs.estimate_ns(prefill(64)) == 7 * MS


def test_timing_refresh_takes_precedence_over_an_acceptance_probe():
    policy = PolicyConfig(estimate_ttl_ns=1000 * MS)
    costs = {prefill(64): 1.0, decode(1): 80.0, decode(2): 100.0, spec(2, 3): 120.0}
    s = scheduler([prefill(64), decode(1), decode(2), spec(2, 3)], costs, policy=policy)
    runner = Runner(s)
    runner.decoding(2, acceptance_prior=(0.0, 0.0))
    s.learning.balance = -(10**18)  # keep learning out while refresh credit builds
    run_until_full_refresh_credit(s, runner)
    s.learning.balance = 0
    s.learning.earn(10_000 * MS)
    plan = s.plan()
    assert plan.execution_class is REFRESH


def test_the_two_ledgers_never_charge_the_same_execution():
    s, runner = pessimistic_setup()
    probe = until_probe(s, runner)
    refresh_before = s.refresh.balance
    fence = runner.commit(probe)
    runner.finish(probe, fence, ExecutionTiming(20 * MS, 20 * MS))
    assert s.refresh.balance == refresh_before and s.refresh.spent_ns == 0
    totals = s.execution_totals()
    assert totals["acceptance_learning"] == {
        "executions": 1,
        "nanoseconds": 20 * MS,
        "episodes": 1,
        "last_episode_ns": 20 * MS,
    }
    completed = sum(t["executions"] for t in totals.values())
    assert completed == runner.fence


def test_probe_candidates_rank_by_gain_then_least_informed_then_shorter_then_smaller():
    def probe(gain, weight, ms, d):
        c = Candidate(d, round(ms * MS), None, 1.0, 1, (), lambda: ([], -1))
        return Probe(c, gain, weight)

    small, large = spec(1, 3), spec(2, 3)
    assert ranks_before(probe(2.0, 9.0, 5, large), probe(1.0, 1.0, 1, small))
    assert ranks_before(probe(1.0, 1.0, 5, large), probe(1.0, 2.0, 1, small))
    assert ranks_before(probe(1.0, 2.0, 1, large), probe(1.0, 2.0, 5, small))
    assert ranks_before(probe(1.0, 2.0, 1, small), probe(1.0, 2.0, 1, large))
    assert not ranks_before(probe(1.0, 2.0, 1, large), probe(1.0, 2.0, 1, small))


def test_the_optimistic_estimate_is_mean_plus_sqrt_ln20_over_twice_the_aged_weight():
    history = PrefixHistory(PopulationPrior(), (0.25,))
    bonus = math.sqrt(math.log(20) / (2 * 2.0))
    assert history.optimistic(1) == pytest.approx(min(1.0, 0.25 + bonus))
    history.age(128)  # one half-life: weight 2 -> 1
    assert history.weight(1) == pytest.approx(1.0)
    assert history.optimistic_survivals(1)[0] == pytest.approx(1.0)
    history = PrefixHistory(PopulationPrior(), (0.0,))
    for _ in range(126):
        history.observe(1, 0.0)
    assert history.optimistic(1) == pytest.approx(math.sqrt(math.log(20) / (2 * 128.0)))


def test_a_probe_observation_moves_the_acceptance_estimate_it_was_funded_for():
    s, runner = pessimistic_setup()
    (h,) = s.requests
    before = s.requests[h].acceptance.history(HEAD_DRAFTS).weight(1)
    probe = until_probe(s, runner)
    runner.finish(probe, runner.commit(probe), accepted=2)
    history = s.requests[h].acceptance.history(HEAD_DRAFTS)
    assert history.survivals(2)[0] > 0.0 and history.weight(1) > before


def test_forecast_observations_stop_at_each_lanes_frozen_ceiling():
    d = spec(2, 4, p=5, device=True)
    s = scheduler([prefill(64), d])
    runner = Runner(s)
    short, long = runner.decoding(2)
    s.requests[short].spec = type(s.requests[short].spec)(64, s.requests[short].num_output + 2)
    plan = s.plan()
    assert plan.descriptor == d
    ceilings = {lane.handle: lane.query_length for lane in plan.lanes}
    assert ceilings[short] == 2 and ceilings[long] == 4
    fence = runner.commit(plan)
    runner.wait(MS)
    records = [CompletionRecord(lane.handle, 0, (1,), num_verified_tokens=1) for lane in plan.lanes]
    before = {h: s.requests[h].forecast.means(3) for h in (short, long)}
    plane = tuple((0.9, 0.9, 0.9) for _ in range(d.batch_capacity))
    s.complete(
        Fence(fence),
        CompletionReport(records, ExecutionTiming(MS), ConfidenceSidecar((plane, plane))),
    )
    after = {h: s.requests[h].forecast.means(3) for h in (short, long)}
    assert after[short][0] > before[short][0]
    assert after[short][1:] == before[short][1:]  # beyond min(D + 1, W, limit) = 2
    assert all(a > b for a, b in zip(after[long], before[long], strict=True))


def test_a_probe_search_that_found_nothing_is_repeated_once_a_cost_changes():
    s, _ = pessimistic_setup(spec_ms=60.0)
    s.learning.earn(10_000 * MS)
    assert s.plan().execution_class is ORDINARY
    for _ in range(2):  # new measurements (median 15 ms) make the deeper round worth it
        s.seed_cost(spec(1, 3), 15 * MS)
    assert s.plan().execution_class is LEARNING
