from __future__ import annotations

import math

import pytest

from ignition.helios.state.acceptance import (
    AcceptanceTracker,
    ConfidenceForecast,
    PopulationPrior,
    PrefixEstimate,
    expected_output,
)
from ignition.helios.types import HEAD_DRAFTS, DraftSource

COPIES = DraftSource("copy")


def test_expected_output_is_one_plus_the_prefix_survivals():
    assert expected_output([0.9, 0.5, 0.2], 4, alpha=1.0) == pytest.approx(1 + 0.9 + 0.5 + 0.2)


def test_expected_output_raises_survivals_to_alpha():
    assert expected_output([0.9, 0.5], 3, alpha=2.0) == pytest.approx(1 + 0.81 + 0.25)


def test_expected_output_is_bounded_by_the_rows():
    assert expected_output([0.9, 0.5, 0.2], 2, alpha=1.0) == pytest.approx(1.9)


def test_the_population_prior_starts_at_half_to_the_depth():
    prior = PopulationPrior()
    assert [prior.mean(d) for d in (1, 2, 3)] == [0.5, 0.25, 0.125]


def test_the_population_prior_moves_one_sixty_fourth_toward_data():
    prior = PopulationPrior()
    prior.observe(1, 1.0)
    assert prior.mean(1) == pytest.approx(0.5 + 0.5 / 64)


def test_accepted_prefixes_supply_ones_and_a_rejection_zeros_longer_prefixes():
    tracker = AcceptanceTracker(PopulationPrior(), preseed=[0.5, 0.5, 0.5, 0.5])
    tracker.observe_round(
        HEAD_DRAFTS, num_offered_drafts=4, num_accepted_drafts=2, is_terminated=False
    )
    s = tracker.history(HEAD_DRAFTS).survivals(4)
    assert s[0] > 0.5 and s[1] > 0.5
    assert s[2] < 0.5 and s[3] < 0.5


def test_termination_censors_the_remaining_suffix():
    tracker = AcceptanceTracker(PopulationPrior(), preseed=[0.5, 0.5, 0.5])
    tracker.observe_round(
        HEAD_DRAFTS, num_offered_drafts=3, num_accepted_drafts=1, is_terminated=True
    )
    s = tracker.history(HEAD_DRAFTS).survivals(3)
    assert s[0] > 0.5
    assert s[1:] == (0.5, 0.5)


def test_width_one_rounds_supply_no_acceptance_observation():
    tracker = AcceptanceTracker(PopulationPrior(), preseed=[0.5])
    tracker.observe_round(
        HEAD_DRAFTS, num_offered_drafts=0, num_accepted_drafts=0, is_terminated=False
    )
    assert tracker.history(HEAD_DRAFTS).weight(1) == 2.0


def test_acceptance_is_tracked_per_source():
    tracker = AcceptanceTracker(PopulationPrior(), preseed=[0.5])
    tracker.observe_round(COPIES, num_offered_drafts=1, num_accepted_drafts=1, is_terminated=False)
    assert tracker.history(HEAD_DRAFTS).survivals(1) == (0.5,)
    assert tracker.history(COPIES).survivals(1)[0] > 0.5


def test_survival_rows_replace_binary_observations():
    tracker = AcceptanceTracker(PopulationPrior(), preseed=[0.5, 0.5])
    tracker.observe_round(
        HEAD_DRAFTS,
        num_offered_drafts=2,
        num_accepted_drafts=2,
        is_terminated=False,
        survival=[0.8, 0.8],
    )
    s = tracker.history(HEAD_DRAFTS).survivals(2)
    expected = 0.5 + (0.8 - 0.5) / 3
    assert list(s) == [pytest.approx(expected), pytest.approx(expected)]


def test_estimates_start_at_weight_two_and_cap_at_128():
    e = PrefixEstimate(0.5)
    assert e.weight == 2.0
    for _ in range(500):
        e.observe(1.0)
    assert e.weight == 128.0


def test_estimates_age_with_a_half_life_of_128_tokens():
    e = PrefixEstimate(0.5, weight=64.0)
    e.age(128)
    assert e.weight == pytest.approx(32.0)


def test_learning_uses_the_bounded_optimistic_estimate():
    e = PrefixEstimate(0.3, weight=8.0)
    assert e.optimistic() == pytest.approx(min(1.0, 0.3 + math.sqrt(math.log(20) / 16)))
    assert PrefixEstimate(0.99).optimistic() == 1.0


def test_survivals_never_increase_with_depth():
    tracker = AcceptanceTracker(PopulationPrior(), preseed=[0.2, 0.9])
    assert tracker.history(HEAD_DRAFTS).survivals(2) == (0.2, 0.2)


def test_a_forecast_starts_from_the_population_prior():
    forecast = ConfidenceForecast(PopulationPrior())
    assert forecast.means(3) == (0.5, 0.25, 0.125)


def test_forecast_observations_stop_at_the_lane_ceiling():
    prior = PopulationPrior()
    forecast = ConfidenceForecast(prior)
    forecast.observe([0.9, 0.9, 0.9], ceiling=2, num_tokens=2)
    means = forecast.means(3)
    assert means[0] > 0.5
    assert means[2] == 0.125
