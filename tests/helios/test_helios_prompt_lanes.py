"""Issue 39: prompts sharing a prefill or mixed program's bucket (``decide/prompt_lanes.py``).

The rule's sentences: a program of L lanes carries the L best prompt rows at its lane
capacity P / L, each taking what it can consume of P / L tokens, in the seed's
prompt-row order (so rows of equal value go least recently served first); with L = 1
the seed's single row. A mixed program's prompt lanes are rows of its batch, so
decoders fill the rest. The differential test (``test_helios_fast_selector.py``,
multi-lane catalogs) holds the bounded search to the same choice.
"""

from __future__ import annotations

from dataclasses import replace

from helios_helpers import Driver, decode, mixed, prefill, request, scheduler

from ignition.components.program_kinds import GraphKind
from ignition.helios.decide.prompt_lanes import pack_lanes
from ignition.helios.decide.service import Prices
from ignition.helios.decide.utility import LaneView, consumable_tokens, lane_order_key
from ignition.helios.plans import LaneRole
from ignition.helios.types import RequestHandle


def view(slot: int, remaining: int, price: float, bonus: float = 0.0, served: int = 0):
    return LaneView(
        handle=RequestHandle(slot, 0),
        epoch=0,
        is_decoder=False,
        prompt_position=0,
        num_prompt_tokens=remaining,
        remaining_output=10,
        remaining_context=1 << 20,
        prices=Prices(price, bonus, 0.0),
        age_ms=0.0,
        last_served_seq=served,
    )


def scored(views, capacity: int):
    out = []
    for v in views:
        tokens = consumable_tokens(v, capacity)
        value = v.prices.prefill_token * tokens
        if tokens >= v.remaining_prompt:
            value += v.prices.output_token + v.prices.delivery
        out.append((lane_order_key(v, value), tokens, v))
    return sorted(out, key=lambda x: x[0])


def taken(picks) -> dict[int, int]:
    return {p.view.slot: p.num_prompt_tokens for p in picks}


def test_one_lane_is_the_seeds_single_prompt_row():
    rows = scored([view(0, 300, 1.0), view(1, 2000, 1.0), view(2, 100, 2.0)], 1024)
    assert taken(pack_lanes(rows, 1)) == {1: 1024}  # the highest value at the bucket


def test_the_lanes_are_the_best_rows_at_the_lane_capacity():
    """At 256 tokens a lane: the short prompt that finishes (bonus 100) and the two
    highest prices; the cheap long one is left out."""
    views = [view(0, 2000, 0.5), view(1, 100, 1.0, bonus=100.0), view(2, 900, 2.0),
             view(3, 700, 1.5)]
    assert taken(pack_lanes(scored(views, 256), 3)) == {1: 100, 2: 256, 3: 256}


def test_a_wave_of_prompts_fills_the_lanes_at_most_a_lane_each():
    """Six 300-token prompts and a four-lane prefill of 1,024 tokens: four lanes of 256
    (each lane a row of P / L tokens), not 300 each (1,200 would overflow the bucket)."""
    one, four = prefill(1024), replace(prefill(1024), prompt_lanes=4)
    s = scheduler([one, four, decode(8)])
    handles = [s.admit(request(300, 8)) for _ in range(6)]
    plan = Driver(s).step()
    assert plan.descriptor == four and len(plan.prompt_rows) == 4
    assert {lane.handle for lane in plan.lanes} <= set(handles)
    assert [lane.num_prompt_tokens for lane in plan.lanes] == [256] * 4


def test_a_wave_rotates_through_the_lanes():
    """The two prompts the first frame left out lead the second: no prompt waits behind
    a wave of others (equal values go least recently served first, and an unserved
    prompt's fairness price only grows)."""
    four = replace(prefill(1024), prompt_lanes=4)
    s = scheduler([prefill(1024), four, decode(8)])
    handles = [s.admit(request(600, 8)) for _ in range(6)]
    driver = Driver(s)
    first = {lane.handle for lane in driver.step().lanes}
    second = {lane.handle for lane in driver.step().lanes}
    assert len(first) == 4 and set(handles) - first <= second


def test_the_one_lane_catalog_takes_one_prompt_per_frame():
    s = scheduler([prefill(1024), decode(8)])
    for _ in range(6):
        s.admit(request(256, 8))
    assert len(Driver(s).step().lanes) == 1


def test_a_mixed_programs_prompt_lanes_are_rows_of_its_batch():
    """B = 8 with 4 prompt lanes: four prompts and four of the seven decoders."""
    one, four = mixed(8, 1024), replace(mixed(8, 1024), prompt_lanes=4)
    s = scheduler([prefill(1024), decode(8), one, four])
    decoders = [s.admit(request(16, 500)) for _ in range(7)]
    driver = Driver(s)
    while any(s.requests[h].prompt_position < 16 for h in decoders):
        driver.step()
    for _ in range(4):
        s.admit(request(256, 8))
    plan = driver.step()
    prompts = [lane for lane in plan.lanes if lane.role is LaneRole.PROMPT]
    assert plan.descriptor == four and len(prompts) == 4
    assert len(plan.lanes) == 8  # every row used: 4 prompts, 4 decoders
    assert plan.kind is GraphKind.MIXED and plan.prompt_row == plan.prompt_rows[0]


def test_a_multi_lane_frame_counts_the_decoders_a_mixed_frame_would_carry():
    """Issue 29's left-out rule for a frame of several prompts: a four-lane prefill of
    1,024 tokens is compared with the one-lane mixed program of B = 8 holding those
    tokens, which carries 7 decoders beside its prompt (a four-lane mixed one, 4)."""
    from ignition.helios.state.cost import CostModel
    from ignition.helios.decide.left_out import CarryTimes

    one = mixed(8, 1024)
    times = CarryTimes([replace(prefill(1024), prompt_lanes=4), one, decode(8)], CostModel(1))
    assert times.carried(1024, prompts=4) == 7
    assert times.carried(1024, prompts=1) == 7
    four = CarryTimes([one, replace(one, prompt_lanes=4)], CostModel(1))
    assert four.carried(1024, prompts=2) == 7 and four.carried(2048, prompts=2) == 0
