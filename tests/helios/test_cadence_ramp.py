"""The cadence ramp (decide/cadence_ramp.py, docs/scheduling.md "The cadence ramp"): a
decoder's delivery and age prices count only as its output age nears the TBT target, so
a wider round is worth the tokens it buys; a round whose extra rows buy too few tokens
stays at width one, and with the ramp off (the ``flat-cadence`` preset) nothing changes."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from helios_helpers import Driver, decode, prefill, request, scheduler, spec

from ignition.helios import Resources
from ignition.helios.config import flat_cadence, objective, policy_from_preset
from ignition.helios.decide import cadence_ramp
from ignition.helios.decide.projection import build_population
from ignition.helios.fast.projection import build_population as fast_population

# Width two costs 1.8x width one. At 0.9 acceptance a round yields 1.9 tokens, 5.6% more
# tokens per ms than width one; at 0.35 it yields 1.35, 25% fewer.
DESCRIPTORS = [decode(4), spec(4, 2), prefill(64)]
COSTS = {DESCRIPTORS[0]: 10.0, DESCRIPTORS[1]: 18.0, DESCRIPTORS[2]: 5.0}


def _kinds(policy, acceptance: float) -> set[str]:
    s = scheduler(DESCRIPTORS, COSTS, policy=policy, resources=Resources(num_request_slots=4))
    for _ in range(4):
        s.admit(request(1, 400, acceptance_prior=(acceptance,)))
    d, rng = Driver(s), random.Random(7)
    for _ in range(10):  # prompts done, rates settled
        d.step(accepted=int(rng.random() < acceptance))
    kinds = set()
    for _ in range(20):
        kinds.add(d.step(accepted=int(rng.random() < acceptance)).descriptor.kind.value)
    return kinds


def test_a_wider_round_that_buys_more_tokens_per_ms_wins():
    assert _kinds(flat_cadence(), 0.9) == {"decode"}  # one delivery whatever the width
    assert _kinds(replace(objective(), cadence_ramp=0.0), 0.9) == {"decode"}  # ramp off
    assert _kinds(objective(), 0.9) == {"speculative"}


def test_a_wider_round_that_buys_too_few_tokens_stays_at_width_one():
    assert _kinds(objective(), 0.35) == {"decode"}


def test_the_ramp_rises_with_age_to_the_target():
    policy = objective()  # tau 75 ms, power 2
    assert cadence_ramp.ramp(policy, 0.0) == 0.0
    assert cadence_ramp.ramp(policy, 37.5) == pytest.approx(0.25)
    assert cadence_ramp.ramp(policy, 75.0) == 1.0
    assert cadence_ramp.ramp(policy, 500.0) == 1.0  # never above the seed's prices
    assert cadence_ramp.ramp(replace(policy, cadence_ramp=1.0), 37.5) == pytest.approx(0.5)
    assert cadence_ramp.ramp(flat_cadence(), 10.0) == 1.0
    assert cadence_ramp.ramp(replace(policy, tbt_target_ms=0.0), 10.0) == 1.0  # no target
    assert policy_from_preset("flat-cadence") == flat_cadence()
    assert objective() == replace(
        flat_cadence(),
        cadence_ramp=2.0,
        generation_left_out=True,
        mixed_width=True,
        population_bounded_optimism=True,
        population_bound_memory=1024.0,
        speculation_within_target=True,
        refresh_could_win=True,
    )


@pytest.mark.parametrize("project", [build_population, fast_population])
def test_only_decoders_cadence_prices_are_ramped_by_their_age(project):
    """Against the flat preset, a decoder's delivery price and reference interval are
    multiplied by its ramp, its output price is not, a prompt's prices are not, and the
    decoders' waiting weight is the sum of their ramps."""

    def views(policy):
        s = scheduler(DESCRIPTORS, COSTS, policy=policy, resources=Resources(num_request_slots=4))
        s.admit(request(1, 400))
        s.admit(request(1, 400))
        d = Driver(s)
        d.step()  # both prompts: now decoders
        s.admit(request(64, 400))  # a prompt
        start = s.now_ns + 30_000_000  # ages of 30 ms at the projected start
        return project(s.requests, s.queue, s.descriptors, s.costs, s.policy, start, 2)

    (flat, flat_decision), (ramped, decision) = views(flat_cadence()), views(objective())
    assert flat_decision.decoder_age_weight is None
    weight = 0.0
    for a, b in zip(flat.decoders, ramped.decoders, strict=True):
        r = cadence_ramp.ramp(objective(), b.age_ms)
        assert 0.0 < r < 1.0
        weight += r
        # prices are scaled by the decision's largest one: compare them relative to another
        assert b.prices.delivery / b.prices.output_token == pytest.approx(
            r * a.prices.delivery / a.prices.output_token
        )
        assert b.sigma_ms == pytest.approx(r * a.sigma_ms)
    assert decision.decoder_age_weight == pytest.approx(weight)
    (p, q) = (flat.prompts[0].prices, ramped.prompts[0].prices)
    assert q.delivery / q.prefill_token == pytest.approx(p.delivery / p.prefill_token)
    assert decision.waiting_coefficient < flat_decision.waiting_coefficient
