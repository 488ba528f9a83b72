from __future__ import annotations

import math

import pytest

from ignition.helios import PolicyConfig, SchedulerError
from ignition.helios.config import policy_from_preset
from ignition.helios.state.cost import Freshness
from tests.helios.helios_helpers import MS, Driver, decode, prefill, request, scheduler, spec

SPECS = [spec(b, w) for b in (1, 2, 4) for w in range(1, 9)]


def test_defaults_are_the_seed_table():
    p = PolicyConfig()
    assert (p.output_token_value, p.token_fairness, p.delivery_fairness) == (64, 16, 4)
    assert (p.decode_age_price, p.terminal_value, p.terminal_age_price) == (0.1, 256, 1)
    assert (p.adaptation_ms, p.estimate_ttl_ns, p.adaptive_verification_alpha) == (
        100,
        30_000_000_000,
        1,
    )


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0])
def test_values_must_be_finite_and_nonnegative(bad):
    with pytest.raises(SchedulerError, match="token_fairness"):
        PolicyConfig(token_fairness=bad)


def test_zero_disables_a_preference():
    assert PolicyConfig(delivery_fairness=0, decode_age_price=0).decode_age_price == 0


def test_alpha_must_be_greater_than_zero():
    with pytest.raises(SchedulerError, match="adaptive_verification_alpha"):
        PolicyConfig(adaptive_verification_alpha=0.0)


def test_throughput_keeps_token_fairness_and_output_value_and_drops_cadence():
    p = policy_from_preset("throughput")
    assert p.token_fairness == PolicyConfig().token_fairness
    assert p.output_token_value == PolicyConfig().output_token_value
    assert p.delivery_fairness == 0 and p.decode_age_price == 0


def test_balanced_uses_the_default_coefficients():
    assert policy_from_preset("balanced") == PolicyConfig()


def test_terminal_overrides_apply_after_preset_selection():
    p = policy_from_preset("throughput", terminal_value=0.0, terminal_age_price=0.0)
    assert (p.terminal_value, p.terminal_age_price) == (0.0, 0.0)
    assert p.delivery_fairness == 0


def test_terminal_overrides_are_validated():
    with pytest.raises(SchedulerError, match="terminal_value"):
        policy_from_preset("balanced", terminal_value=-1.0)


def test_unknown_preset_is_rejected_by_name():
    with pytest.raises(SchedulerError, match="latency"):
        policy_from_preset("latency")


def _one_decoder(s):
    """Admits one request and runs it until it decodes; returns its handle."""
    h = s.admit(request(64, acceptance_prior=(0.9,) * 7))
    driver = Driver(s)
    while not s.requests[h].is_decoder:
        driver.step()
    return h


def test_configure_policy_before_admission_sets_the_preferences_selection_uses():
    """PolicyConfig can be supplied before admission through configure_policy: a large
    alpha makes the same decoder verify at width one instead of eight."""
    widths = {}
    for alpha in (1.0, 8.0):
        s = scheduler([*SPECS, prefill(64)], lambda d: 2.0 + d.proposal_depth)
        s.configure_policy(PolicyConfig(adaptive_verification_alpha=alpha))
        _one_decoder(s)
        (lane,) = s.plan().lanes
        widths[alpha] = lane.query_length
    assert widths == {1.0: 8, 8.0: 1}


def test_configure_policy_sets_the_timing_freshness_interval():
    s = scheduler([prefill(64), decode(1)])
    s.configure_policy(PolicyConfig(estimate_ttl_ns=MS))
    s.advance_to(2 * MS)
    assert s.costs.freshness(decode(1), s.now_ns) is Freshness.STALE


def test_configure_policy_after_admission_is_refused_and_changes_nothing():
    s = scheduler([prefill(64), decode(1)])
    s.admit(request(64))
    with pytest.raises(SchedulerError, match="configure_policy must precede admission"):
        s.configure_policy(PolicyConfig(token_fairness=0.0))
    assert s.policy == PolicyConfig()
