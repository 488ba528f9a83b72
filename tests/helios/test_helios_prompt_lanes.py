"""Issue 39: prompts sharing a prefill or mixed program's bucket (``decide/prompt_lanes.py``).

The rule's sentences: the lead lane is the seed's prompt row and every multi-lane
candidate carries it; the other lanes fill the bucket in the better of the fairness and
finishing-first orders, each row taking what it can consume; with L = 1 the seed's
single row. A mixed program's prompt lanes are rows of its batch, so decoders fill the
rest. The differential test (``test_helios_fast_selector.py``, multi-lane catalogs)
holds the bounded search to the same choice.
"""

from __future__ import annotations

from dataclasses import replace

from helios_helpers import Driver, decode, mixed, prefill, request, scheduler

from ignition.components.catalog import GraphKind
from ignition.helios.decide.prompt_lanes import pack_lanes
from ignition.helios.decide.service import Prices
from ignition.helios.decide.utility import LaneView, consumable_tokens, lane_order_key
from ignition.helios.types import LaneRole, RequestHandle


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


def scored(views, bucket: int):
    out = []
    for v in views:
        tokens = consumable_tokens(v, bucket)
        value = v.prices.prefill_token * tokens
        if tokens >= v.remaining_prompt:
            value += v.prices.output_token + v.prices.delivery
        out.append((lane_order_key(v, value), tokens, v))
    return sorted(out, key=lambda x: x[0])


def taken(picks) -> dict[int, int]:
    return {p.view.slot: p.num_prompt_tokens for p in picks}


def test_one_lane_is_the_seeds_single_prompt_row():
    rows = scored([view(0, 300, 1.0), view(1, 2000, 1.0), view(2, 100, 2.0)], 1024)
    assert taken(pack_lanes(rows, 1, 1024)) == {1: 1024}  # the highest value at the bucket


def test_a_wave_of_equal_prompts_shares_the_bucket():
    rows = scored([view(i, 256, 1.0, bonus=64.0) for i in range(6)], 1024)
    picks = pack_lanes(rows, 4, 1024)
    assert taken(picks) == {0: 256, 1: 256, 2: 256, 3: 256}
    assert all(p.expected_output == 1.0 for p in picks)  # each finishes its prompt


def test_the_lead_lane_is_kept_where_leaving_it_out_would_be_worth_more():
    """A long prompt whose price grew (the seed's row) and two short ones: the two short
    ones alone (2 x 550 = 1,100) beat any pair with the long one (1,074), but the lead
    is the row a single-lane program would serve, so it keeps its lane: no prompt waits
    behind a wave of others it out-ranks."""
    lead = view(0, 4000, 1.0)
    shorts = [view(1, 500, 0.9, bonus=100.0), view(2, 500, 0.9, bonus=100.0)]
    picks = pack_lanes(scored([lead, *shorts], 1024), 2, 1024)
    assert 0 in taken(picks)
    assert sum(p.value for p in picks) < 1100.0


def test_finishing_first_gives_a_long_lead_only_the_tokens_left():
    """The finishing-first order: the short prompt finishes (its first token and delivery
    are worth 100) and the lead takes the 524 tokens left, against the fairness order's
    lead alone over the whole bucket (1,024 against 1,074)."""
    lead = view(0, 4000, 1.0)
    short = view(1, 500, 0.9, bonus=100.0)
    picks = pack_lanes(scored([lead, short], 1024), 2, 1024)
    assert taken(picks) == {0: 524, 1: 500}
    assert sum(p.value for p in picks) == 524 * 1.0 + 500 * 0.9 + 100.0


def test_the_other_lanes_take_the_tokens_left_partially():
    rows = scored([view(0, 700, 1.0), view(1, 900, 0.5)], 1024)
    assert taken(pack_lanes(rows, 4, 1024)) == {0: 700, 1: 324}


def test_a_multi_lane_prefill_program_carries_a_wave_in_one_frame():
    one, four = prefill(1024), replace(prefill(1024), prompt_lanes=4)
    s = scheduler([one, four, decode(8)])
    handles = [s.admit(request(256, 8)) for _ in range(6)]
    plan = Driver(s).step()
    assert plan.descriptor == four
    assert len(plan.prompt_rows) == 4
    assert {lane.handle for lane in plan.lanes} <= set(handles)
    assert all(lane.num_prompt_tokens == 256 for lane in plan.lanes)


def test_the_one_lane_catalog_takes_one_prompt_per_frame():
    s = scheduler([prefill(1024), decode(8)])
    for _ in range(6):
        s.admit(request(256, 8))
    assert len(Driver(s).step().lanes) == 1


def test_a_mixed_programs_prompt_lanes_are_rows_of_its_batch():
    """B = 8 with 3 prompt lanes: three prompts and five of the seven decoders."""
    one, three = mixed(8, 1024), replace(mixed(8, 1024), prompt_lanes=3)
    s = scheduler([prefill(1024), decode(8), one, three])
    decoders = [s.admit(request(16, 500)) for _ in range(7)]
    driver = Driver(s)
    while any(s.requests[h].prompt_position < 16 for h in decoders):
        driver.step()
    for _ in range(3):
        s.admit(request(256, 8))
    plan = driver.step()
    prompts = [lane for lane in plan.lanes if lane.role is LaneRole.PROMPT]
    assert plan.descriptor == three and len(prompts) == 3
    assert len(plan.lanes) == 8  # every row used: 3 prompts, 5 decoders
    assert plan.kind is GraphKind.MIXED and plan.prompt_row == plan.prompt_rows[0]
