from __future__ import annotations

from dataclasses import replace

from helios_helpers import decode, spec

from ignition.helios.state.cost import CostModel, Freshness, median

TTL = 30_000_000_000


def test_zero_means_unknown():
    costs = CostModel(TTL)
    assert costs.estimate_ns(decode(4)) == 0
    assert costs.freshness(decode(4), 0) is Freshness.UNKNOWN


def test_descriptor_supplied_estimates_start_unknown():
    d = replace(decode(4), estimated_duration_ns=5_000_000)
    assert CostModel(TTL).estimate_ns(d) == 0


def test_first_positive_observation_sets_the_estimate():
    costs = CostModel(TTL)
    costs.observe(decode(4), 7_000, now_ns=0)
    assert costs.estimate_ns(decode(4)) == 7_000


def test_fresh_samples_use_the_median_of_the_last_nine():
    costs = CostModel(TTL)
    # the last nine hold five 100s and four 9000s: a window of seven, eight, ten, eleven
    # or every sample would give 9000 or the average of the two
    samples = [9_000] * 3 + [100] * 5 + [9_000] * 4
    for i, s in enumerate(samples):
        costs.observe(decode(4), s, now_ns=i)
    assert costs.estimate_ns(decode(4)) == 100 == median(samples[-9:])


def test_an_even_count_averages_the_middle_pair():
    costs = CostModel(TTL)
    for i, s in enumerate([100, 300, 200, 400]):
        costs.observe(decode(4), s, now_ns=i)
    assert costs.estimate_ns(decode(4)) == (200 + 300) // 2


def test_missing_or_zero_intervals_neither_change_nor_refresh():
    costs = CostModel(TTL)
    costs.observe(decode(4), 1_000, now_ns=0)
    assert not costs.observe(decode(4), 0, now_ns=TTL + 1)
    assert costs.estimate_ns(decode(4)) == 1_000
    assert costs.freshness(decode(4), TTL + 1) is Freshness.STALE


def test_a_stale_entry_keeps_its_measured_cost():
    costs = CostModel(TTL)
    costs.observe(decode(4), 1_000, now_ns=0)
    assert costs.freshness(decode(4), TTL + 1) is Freshness.STALE
    assert costs.estimate_ns(decode(4)) == 1_000


def test_the_first_observation_of_a_stale_entry_replaces_the_estimate():
    costs = CostModel(TTL)
    for i in range(5):
        costs.observe(decode(4), 1_000, now_ns=i)
    costs.observe(decode(4), 9_000, now_ns=TTL + 10)
    assert costs.estimate_ns(decode(4)) == 9_000
    assert costs.freshness(decode(4), TTL + 10) is Freshness.FRESH


def test_shapes_expire_independently():
    costs = CostModel(TTL)
    costs.observe(decode(4), 1_000, now_ns=0)
    costs.observe(decode(8), 2_000, now_ns=TTL)
    assert costs.freshness(decode(4), TTL + 1) is Freshness.STALE
    assert costs.freshness(decode(8), TTL + 1) is Freshness.FRESH


def test_a_smaller_producer_is_a_distinct_program():
    costs = CostModel(TTL)
    costs.observe(spec(2, 3, d=2), 1_000, now_ns=0)
    assert costs.estimate_ns(spec(2, 3, d=5)) == 0
