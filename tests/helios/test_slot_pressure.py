"""Slot pressure (decide/slot_pressure.py, docs/scheduling.md "Slot pressure"): while
requests wait for a slot, a decoder's output tokens are worth more, so a wider round pays
where it did not; with no one waiting, or the rule off, nothing changes."""

from __future__ import annotations

from dataclasses import replace

import pytest
from helios_helpers import Driver, decode, prefill, request, scheduler, spec

from ignition.helios import Resources
from ignition.helios.config import flat_cadence
from ignition.helios.decide.projection import build_population
from ignition.helios.decide.slot_pressure import pressure_factor
from ignition.helios.types import SchedulerError

# Width two costs 1.8x width one; at 0.9 acceptance a round yields 1.9 tokens: under the
# flat-cadence preset's prices (the objective preset before the cadence ramp, which
# widens this round by itself: test_cadence_ramp.py) a round is worth about one
# delivery, so width one wins.
DESCRIPTORS = [decode(4), spec(4, 2), prefill(64)]
COSTS = {DESCRIPTORS[0]: 10.0, DESCRIPTORS[1]: 18.0, DESCRIPTORS[2]: 5.0}


def _kinds(pressure: float, waiting: int) -> set[str]:
    policy = replace(flat_cadence(), slot_pressure=pressure)
    s = scheduler(DESCRIPTORS, COSTS, policy=policy, resources=Resources(num_request_slots=4))
    for _ in range(4):
        s.admit(request(1, 400, acceptance_prior=(0.9,)))
    d = Driver(s)
    for _ in range(10):  # prompts done, rates settled
        d.step(accepted=1)
    s.note_waiting(waiting)
    return {d.step(accepted=1).descriptor.kind.value for _ in range(20)}


def test_waiting_requests_make_the_wider_round_pay():
    assert _kinds(0.0, 8) == {"decode"}  # the rule off: width one
    assert _kinds(2.0, 0) == {"decode"}  # nobody waiting: nothing changes
    assert _kinds(2.0, 8) == {"speculative"}  # slots scarce: width two


def test_the_factor_scales_only_decoders_output_price():
    assert pressure_factor(0.0, 5, 4) == 1.0
    assert pressure_factor(2.0, 0, 4) == 1.0
    assert pressure_factor(2.0, 2, 4) == 2.0
    assert pressure_factor(2.0, 40, 4) == 3.0  # capped at one waiting request per decoder
    policy = replace(flat_cadence(), slot_pressure=2.0)
    s = scheduler(DESCRIPTORS, COSTS, policy=policy, resources=Resources(num_request_slots=4))
    s.admit(request(1, 400))
    Driver(s).step()  # the prompt: now a decoder
    s.admit(request(64, 400))  # a prompt

    def views(waiting: int):
        population, _ = build_population(
            s.requests, s.queue, s.descriptors, s.costs, s.policy, s.now_ns, 2, waiting
        )
        return population.decoders[0].prices, population.prompts[0].prices

    # prices are scaled by the decision's largest one: compare them relative to another
    (dec0, pro0), (dec1, pro1) = views(0), views(1)
    rel0, rel1 = dec0.output_token / dec0.delivery, dec1.output_token / dec1.delivery
    assert rel1 == pytest.approx(rel0 * 3.0)  # 1 + 2 * min(1, 1) / 1
    assert dec1.prefill_token / dec1.delivery == pytest.approx(dec0.prefill_token / dec0.delivery)
    assert pro1.output_token / dec1.delivery == pytest.approx(pro0.output_token / dec0.delivery)


def test_note_waiting_rejects_what_is_not_a_count():
    s = scheduler(DESCRIPTORS, COSTS)
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(SchedulerError, match="note_waiting"):
            s.note_waiting(bad)
