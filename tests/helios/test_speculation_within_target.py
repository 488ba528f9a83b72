"""Speculation within the TBT target (PolicyConfig.speculation_within_target; docs/scheduling.md,
"Speculation within the TBT target"): a speculative frame carrying no prompt whose
estimate exceeds the TBT target is rejected, for ordinary selection and acceptance
probes alike; width one serves the same decoders, so it is never rejected."""

from __future__ import annotations

from dataclasses import replace

import pytest
from exploration_helpers import LEARNING, MS, ORDINARY, Runner
from helios_helpers import decode, prefill, scheduler, spec

from ignition.helios import HEAD_DRAFTS, PolicyConfig
from ignition.helios.config import objective
from ignition.helios.decide.selector import Exhaustive

# four decoders: width one 30 ms, width two 36 ms, width three 42 ms. At full acceptance
# width three earns most (3 / 42 > 2 / 36 > 1 / 30), but it breaks a 40 ms target.
COSTS = {prefill(64): 1.0, decode(4): 30.0, spec(4, 2): 36.0, spec(4, 3): 42.0}


def _policy(rule: bool, target: float = 40.0) -> PolicyConfig:
    return PolicyConfig(tbt_target_ms=target, speculation_within_target=rule)


def _accepting(policy: PolicyConfig, costs: dict = COSTS):
    """Four decoders whose drafts were all accepted over many rounds."""
    s = scheduler(list(costs), costs, policy=policy)
    runner = Runner(s)
    for handle in runner.decoding(4, output=1000):
        tracker = s.requests[handle].acceptance
        for _ in range(200):
            tracker.observe_round(
                HEAD_DRAFTS, num_offered_drafts=2, num_accepted_drafts=2, is_terminated=False
            )
    return s


def _plans(s):
    return (s.plan_with(Exhaustive(), record=False), s.plan())


def test_without_the_rule_the_widest_round_wins_past_the_target():
    for plan in _plans(_accepting(_policy(False))):
        assert plan.descriptor == spec(4, 3)


def test_a_round_past_the_target_is_not_chosen():
    for plan in _plans(_accepting(_policy(True))):
        assert plan.descriptor == spec(4, 2)
        assert plan.execution_class is ORDINARY


def test_without_a_target_the_rule_constrains_nothing():
    for plan in _plans(_accepting(_policy(True, target=0.0))):
        assert plan.descriptor == spec(4, 3)


def test_width_one_past_the_target_still_serves_the_decoders():
    """Every frame is past a 20 ms target: the rounds are rejected, width one is not."""
    for plan in _plans(_accepting(_policy(True, target=20.0))):
        assert plan.descriptor == decode(4)


def test_a_rejected_round_scores_minus_infinity_and_the_rest_keep_their_scores():
    s = _accepting(_policy(True))
    found = Exhaustive().evaluate(replace(s.selection_state(), start_ns=s.now_ns)).inference
    wide = [c for c in found if c.descriptor == spec(4, 3)]
    narrow = [c for c in found if c.descriptor in (spec(4, 2), decode(4))]
    assert wide and all(c.score == float("-inf") for c in wide)
    assert narrow and all(c.score > float("-inf") for c in narrow)


def _fresh_learner(rule: bool):
    """Four fresh decoders that never drafted (optimism 1.0 at every depth), a width-one
    frame the ordinary choice, and full learning credit: a width-three probe would be
    worth 3 / 42 against 1 / 30, and it is past the 40 ms target."""
    costs = {prefill(64): 1.0, decode(4): 30.0, spec(4, 3): 42.0}
    policy = _policy(rule)
    s = scheduler(list(costs), costs, policy=policy)
    runner = Runner(s)
    handles = runner.decoding(4, output=1000)
    for handle in handles:
        tracker = s.requests[handle].acceptance
        for _ in range(200):  # ordinary: the mean says drafts never survive
            tracker.observe_round(
                HEAD_DRAFTS, num_offered_drafts=2, num_accepted_drafts=0, is_terminated=False
            )
        s.requests[handle].acceptance.history(HEAD_DRAFTS).age(4096)  # optimism again
    s.learning.earn(10_000 * MS)
    return s


@pytest.mark.parametrize("rule, expected", [(False, LEARNING), (True, ORDINARY)])
def test_a_probe_past_the_target_is_not_run(rule, expected):
    s = _fresh_learner(rule)
    for plan in _plans(s):
        assert plan.execution_class is expected
        assert plan.descriptor == (spec(4, 3) if expected is LEARNING else decode(4))


def test_the_objective_preset_keeps_speculation_within_its_target():
    assert objective().speculation_within_target
    assert not PolicyConfig().speculation_within_target
