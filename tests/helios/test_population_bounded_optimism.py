"""Probe optimism bounded by the population (PolicyConfig.population_bounded_optimism;
docs/scheduling.md, "Probe optimism bounded by the population"): a request is no more
optimistic at a depth than its own mean or its population's upper bound, whichever is
higher. The population's bound is its mean, plus the pull its 0.5^d start still has on
it, plus the bonus of a request estimate at min(observations, 64)."""

from __future__ import annotations

import math

import pytest
from exploration_helpers import LEARNING, MS, ORDINARY, Runner
from helios_helpers import decode, prefill, scheduler, spec

from ignition.helios import HEAD_DRAFTS, PolicyConfig
from ignition.helios.config import objective
from ignition.helios.decide.selector import Exhaustive
from ignition.helios.state.acceptance import (
    OPTIMISM_LOG,
    POPULATION_STEP,
    PopulationPrior,
    PrefixHistory,
    SourcePriors,
)


def _learned(value: float, n: int, *, bounds: bool = True) -> PopulationPrior:
    prior = PopulationPrior(bounds_requests=bounds)
    for _ in range(n):
        prior.observe(1, value)
    return prior


def test_a_population_without_observations_bounds_nothing():
    assert PopulationPrior(bounds_requests=True).upper(1) == 1.0


def test_the_upper_bound_is_the_mean_plus_the_start_pull_plus_the_bonus_at_64():
    for n in (10, 64, 500):
        prior = _learned(0.3, n)
        pull = (1 - POPULATION_STEP) ** n
        bonus = math.sqrt(OPTIMISM_LOG / (2 * min(n, 64)))
        assert prior.upper(1) == pytest.approx(min(1.0, prior.mean(1) + pull + bonus))
    assert _learned(0.3, 500).upper(1) < 0.46  # 0.30 + 0.00 + 0.15


def test_a_fresh_request_is_no_more_optimistic_than_its_population():
    bounded = PrefixHistory(_learned(0.3, 500))
    free = PrefixHistory(_learned(0.3, 500, bounds=False))
    # its own estimate: the population mean at weight 2, optimistic 0.3 + 0.87
    assert free.optimistic_survivals(1)[0] == pytest.approx(1.0)
    assert bounded.optimistic_survivals(1)[0] == pytest.approx(_learned(0.3, 500).upper(1))
    assert bounded.optimistic_outputs(1, 1.0)[2] == pytest.approx(
        1 + _learned(0.3, 500).upper(1)
    )


def test_a_request_whose_own_evidence_is_higher_keeps_its_mean():
    prior = _learned(0.3, 500)
    history = PrefixHistory(prior)
    for _ in range(40):
        history.observe(1, 1.0)  # moves the population too, a little
    own = history.survivals(1)[0]
    assert own > prior.upper(1)
    assert history.optimistic_survivals(1)[0] >= own


def test_a_cached_bound_follows_the_population():
    prior = _learned(0.3, 500)
    history = PrefixHistory(prior)
    before = history.optimistic_survivals(1)[0]
    other = PrefixHistory(prior)
    for _ in range(300):
        other.observe(1, 1.0)  # another request of the population accepts everything
    after = history.optimistic_survivals(1)[0]
    assert after == pytest.approx(prior.upper(1))
    assert after > before + 0.3


def test_depths_the_population_never_observed_stay_unbounded():
    history = PrefixHistory(_learned(0.3, 500))
    assert history.optimistic_survivals(2)[1] == pytest.approx(history.optimistic_survivals(1)[0])
    free = PrefixHistory(_learned(0.3, 500, bounds=False))
    assert free.optimistic_survivals(2)[1] == pytest.approx(1.0)


def test_the_objective_preset_bounds_and_the_seed_default_does_not():
    assert objective().population_bounded_optimism
    assert not PolicyConfig().population_bounded_optimism
    assert SourcePriors(True).of(HEAD_DRAFTS).bounds_requests
    assert not SourcePriors().of(HEAD_DRAFTS).bounds_requests


def _fresh_decoder(bounded: bool):
    """A 10 ms decode and a 15 ms width-two round: the round pays above 0.5 acceptance.
    A first request teaches the population that drafts survive 30% of the time, then
    leaves; a fresh one decodes with full learning credit."""
    costs = {prefill(64): 1.0, decode(1): 10.0, spec(1, 2): 15.0}
    policy = PolicyConfig(population_bounded_optimism=bounded)
    s = scheduler(list(costs), costs, policy=policy)
    runner = Runner(s)
    (teacher,) = runner.decoding(1, output=1000)
    tracker = s.requests[teacher].acceptance
    for i in range(500):
        accepted = 1 if i % 10 < 3 else 0
        tracker.observe_round(
            HEAD_DRAFTS, num_offered_drafts=1, num_accepted_drafts=accepted, is_terminated=False
        )
    s.cancel(teacher)
    runner.decoding(1, output=1000)
    s.learning.earn(10_000 * MS)
    return s


@pytest.mark.parametrize("bounded, expected", [(False, LEARNING), (True, ORDINARY)])
def test_a_probe_the_population_rules_out_is_not_run(bounded, expected):
    """Unbounded, the fresh request's optimistic 1.0 makes the round worth 2 / 15 > 1 / 10:
    a probe. Bounded by the population's 0.45, 1.45 / 15 < 1 / 10: an ordinary decode.
    Both selectors."""
    s = _fresh_decoder(bounded)
    for plan in (s.plan(), s.plan_with(Exhaustive(), record=False)):
        assert plan.execution_class is expected
        assert plan.descriptor == (spec(1, 2) if expected is LEARNING else decode(1))


def _observed(values, memory: float) -> PopulationPrior:
    prior = PopulationPrior(bounds_requests=True, bound_memory=memory)
    for value in values:
        prior.observe(1, value)
    return prior


def test_with_a_memory_the_bound_is_the_discounted_mean_plus_its_bonus():
    values = [1.0 if i % 10 < 6 else 0.0 for i in range(300)]
    prior = _observed(values, 128.0)
    keep = 1 - 1 / 128
    weight = sum(keep**i for i in range(300))
    mean = sum(v * keep ** (299 - i) for i, v in enumerate(values)) / weight
    bonus = math.sqrt(OPTIMISM_LOG / (2 * weight))
    assert prior.upper(1) == pytest.approx(mean + bonus)


def test_one_lucky_frame_moves_the_memory_bound_little_and_the_moving_one_past_break_even():
    """1,000 rounds at 0.6, then one B = 64 frame whose drafts all survived (a probe's
    burst): the prior's moving mean (1/64 a step) jumps toward 1.0, so its bound says a
    B = 64 round that pays above 0.77 might; the bound over 1,024 observations does not."""
    values = [1.0 if i % 5 < 3 else 0.0 for i in range(1000)] + [1.0] * 64
    moving, remembered = _observed(values, 0.0), _observed(values, 1024.0)
    assert moving.upper(1) > 0.95
    assert remembered.upper(1) < 0.72


def test_the_objective_preset_bounds_over_1024_observations():
    assert objective().population_bound_memory == 1024.0
    assert PolicyConfig().population_bound_memory == 0.0
    assert SourcePriors(True, 1024.0).of(HEAD_DRAFTS).bound_memory == 1024.0
    assert SourcePriors(False, 1024.0).of(HEAD_DRAFTS).bound_memory == 0.0


@pytest.mark.parametrize("memory", [0.5, -1.0, float("nan")])
def test_a_memory_below_one_observation_is_refused_naming_the_field(memory):
    from ignition.helios import SchedulerError

    with pytest.raises(SchedulerError, match="population_bound_memory"):
        PolicyConfig(population_bound_memory=memory)
