"""The newcomer rule of docs/scheduling.md (issue 12): a request without token history
starts at the geometric mean of a decoder's best per-stream rate and the token
normalizer."""

from __future__ import annotations

import math

import pytest
from helios_helpers import Driver, decode, mixed, prefill, request, scheduler

from ignition.helios.config import NEWCOMER_RULE_NAMES, PolicyConfig
from ignition.helios.decide import utility
from ignition.helios.fast.projection import current_normalizers
from ignition.helios.types import SchedulerError

MEASURED = [(prefill(4096), 62.0), (decode(8), 10.0), (decode(32), 27.0)]


def test_the_generation_yardstick_is_the_best_decode_graphs_per_stream_rate():
    # four streams: decode(8) gives each 1 token per 10 ms; prefill graphs do not count
    assert utility.generation_start_rate(MEASURED, 4) == pytest.approx(0.1)


def test_the_normalizer_yardstick_is_the_token_normalizer_over_every_graph():
    assert utility.normalizer_start_rate(MEASURED, 4) == pytest.approx(4096 / (4 * 62.0))


def test_a_newcomer_starts_at_the_geometric_mean_of_the_two_yardsticks():
    low, high = 0.1, 4096 / (4 * 62.0)
    start = utility.balanced_start_rate(MEASURED, 4)
    assert start == pytest.approx(math.sqrt(low * high))
    # it minimises the worst multiplicative distance to both yardsticks
    worst = max(start / low, high / start)
    for other in (start * 0.9, start * 1.1):
        assert max(other / low, high / other) > worst


def test_without_a_measured_generation_graph_the_rule_falls_back_to_the_normalizer():
    assert utility.balanced_start_rate([(prefill(512), 50.0)], 2) == pytest.approx(512 / 100)


def test_the_scheduler_prices_newcomers_from_the_rule():
    s = scheduler([prefill(4096), decode(8)], {prefill(4096): 62.0, decode(8): 10.0})
    for _ in range(4):
        s.admit(request(2000))
    norms = current_normalizers(s.descriptors, s.costs, s.requests.values(), "balanced")
    assert norms.token_rate == pytest.approx(math.sqrt(0.1 * 4096 / (4 * 62.0)))


def test_the_earlier_rule_remains_selectable_for_comparison():
    assert set(utility.NEWCOMER_RULES) == {"balanced", "whole-prompt", "generation", "normalizer"}
    assert set(utility.NEWCOMER_RULES) == set(NEWCOMER_RULE_NAMES)
    assert PolicyConfig().newcomer_rule == "balanced"


def _plans(rule: str) -> list[tuple[str, int]]:
    """The frames a scheduler under newcomer ``rule`` runs while requests keep arriving."""
    costs = {prefill(512): 20.0, prefill(4096): 62.0, mixed(8, 256): 18.0, decode(8): 10.0}
    s = scheduler(costs, costs, policy=PolicyConfig(newcomer_rule=rule))
    driver = Driver(s)
    out = []
    for i in range(24):
        if i % 3 == 0:
            s.admit(request(300 + 700 * (i % 4), 40))
        plan = driver.step()
        if plan is not None:
            out.append((str(plan.descriptor), len(plan.lanes)))
    return out


def test_the_policy_field_names_the_rule_a_scheduler_runs():
    """``PolicyConfig.newcomer_rule`` reaches the decisions: the earlier start changes
    them (a scheduler that ignored the field would run the balanced rule for both)."""
    assert _plans("normalizer") != _plans("balanced")


def test_a_policy_naming_an_unknown_newcomer_rule_is_refused_with_the_field_named():
    with pytest.raises(SchedulerError, match=r"PolicyConfig.newcomer_rule = 'seed'"):
        PolicyConfig(newcomer_rule="seed")
    with pytest.raises(SchedulerError, match=r"PolicyConfig.left_out = 0: expected true"):
        PolicyConfig(left_out=0)
