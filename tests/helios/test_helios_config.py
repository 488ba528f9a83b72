from __future__ import annotations

import math

import pytest

from ignition.helios import PolicyConfig, SchedulerError
from ignition.helios.config import policy_from_preset


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
