"""Issue 14: lane_core.py's arrays give LaneTable the same orders and bound sums as the
Python loops they replace (the definition, ``decide.rounds.LaneTable``),
float for float, on random views with tied values, exhausted outputs and contexts.
Every test runs twice: with numpy arrays for every table, and with the plain lists
small tables use (``LaneLists``)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ignition.helios.decide.rounds import LaneTable as ReferenceLaneTable
from ignition.helios.decide.service import Prices
from ignition.helios.decide.utility import Decision, LaneView
from ignition.helios.fast import lane_core
from ignition.helios.fast.lane_table import LaneTable
from ignition.helios.fast.pair_bounds import DecoderRows
from ignition.helios.types import RequestHandle

MAX_DEPTH = 4


@pytest.fixture(autouse=True, params=["arrays", "lists"])
def table_kind(request, monkeypatch):
    """Every table as numpy arrays, or every table as LaneLists."""
    monkeypatch.setattr(lane_core, "SMALL_TABLE", 0 if request.param == "arrays" else 10**9)
    return request.param


def _views(rng: random.Random) -> list[LaneView]:
    prices = [rng.choice([0.0, 0.25, 1.0, 3.5]) for _ in range(3)]  # few: values tie
    out = []
    for slot in rng.sample(range(64), rng.randint(0, 24)):
        depth = rng.randint(0, MAX_DEPTH)
        out.append(
            LaneView(
                handle=RequestHandle(slot, 1),
                epoch=0,
                is_decoder=True,
                prompt_position=8,
                num_prompt_tokens=8,
                remaining_output=rng.choice([0, 1, 2, 3, 50]),
                remaining_context=rng.choice([-1, 0, 1, 2, 100]),
                prices=Prices(1.0, rng.choice(prices), rng.choice([0.0, 0.5])),
                age_ms=rng.choice([0.0, 2.0]),
                last_served_seq=rng.choice([0, 1, 2]),
                sigma_ms=rng.choice([None, 1.5]),
                survivals=tuple(rng.choice([0.0, 0.5, 0.9]) for _ in range(depth)),
            )
        )
    return out


def _decision(rng: random.Random) -> Decision:
    return Decision(
        age_price=rng.choice([0.0, 0.01]),
        num_active_decoders=8,
        alpha=rng.choice([1.0, 0.5]),
        log_scale=0.0,
    )


def test_array_orders_equal_the_python_sort_by_value_recency_and_slot():
    rng = random.Random(14)
    for _ in range(400):
        views, decision = _views(rng), _decision(rng)
        fast = LaneTable(views, decision, MAX_DEPTH)
        ref = ReferenceLaneTable(views, decision, MAX_DEPTH)
        for cap in range(0, MAX_DEPTH + 2):
            assert fast.order(cap) == ref.order(cap), (cap, views)


def test_bound_sums_equal_the_sequential_sum_of_the_positive_values_best_first():
    rng = random.Random(15)
    for _ in range(400):
        views, decision = _views(rng), _decision(rng)
        table = LaneTable(views, decision, MAX_DEPTH)
        ref = ReferenceLaneTable(views, decision, MAX_DEPTH)
        caps = list(range(1, MAX_DEPTH + 2))
        table.arrays.positive_sums(rng.sample(caps, rng.randint(1, len(caps))))
        for cap in caps:
            values = sorted((value for _, _, value in ref.order(cap)), reverse=True)
            for max_lanes in (0, 1, 3, 64):
                expected = 0.0
                for value in values[:max_lanes]:
                    if not value > 0:
                        break
                    expected += value
                assert table.arrays.positive_sum(cap, max_lanes) == expected


def test_leaders_from_the_arrays_are_the_reference_leaders_of_every_ordering():
    rng = random.Random(16)
    for _ in range(300):
        views, decision = _views(rng), _decision(rng)
        fast = LaneTable(views, decision, MAX_DEPTH)
        ref = ReferenceLaneTable(views, decision, MAX_DEPTH)
        cap, length = rng.randint(1, MAX_DEPTH + 1), rng.randint(0, 10)
        duration = rng.choice([0.5, 3.0])
        got = [v.handle for v in fast._leaders(cap, length, duration)]
        assert got == [v.handle for v in ref._leaders(cap, length, duration)]


def test_arrays_with_other_outputs_order_as_a_table_built_from_those_outputs():
    """The probe search's optimistic table shares the ordinary arrays but its outputs."""
    rng = random.Random(17)
    for _ in range(300):
        views, decision = _views(rng), _decision(rng)
        survivals = [tuple(rng.choice([0.0, 0.6, 1.0]) for _ in range(MAX_DEPTH)) for _ in views]
        ordinary = LaneTable(views, decision, MAX_DEPTH)
        ref = ReferenceLaneTable(views, decision, MAX_DEPTH, survivals)
        outputs = np.array(ref._outputs, dtype=np.float64).reshape(len(views), MAX_DEPTH + 2)
        arrays = ordinary.arrays.with_outputs(outputs)
        for cap in range(0, MAX_DEPTH + 2):
            assert arrays.order(cap) == ref.order(cap), (cap, views)


def test_an_order_head_is_the_first_entries_of_the_full_order():
    """Cohort searches read only the first few of an order; the rest stay unconverted."""
    rng = random.Random(18)
    for _ in range(200):
        views, decision = _views(rng), _decision(rng)
        arrays = LaneTable(views, decision, MAX_DEPTH).arrays
        ref = ReferenceLaneTable(views, decision, MAX_DEPTH)
        cap, length = rng.randint(0, MAX_DEPTH + 1), rng.randint(0, 30)
        assert arrays.head(cap, length) == ref.order(cap)[:length]
        assert arrays.order(cap) == ref.order(cap)


def test_pair_bound_sums_read_from_the_decoder_table_equal_their_own_computation():
    """fast/pair_bounds.DecoderRows reads a decision's ready decoders' intercept sums from
    the decoder table's orders (the same values: fixed + price * output at the lane
    ceiling); they equal the sums it computes itself, float for float, at every width."""
    rng = random.Random(16)
    for _ in range(300):
        views, decision = _views(rng), _decision(rng)
        table = LaneTable(views, decision, MAX_DEPTH)
        shared, own = DecoderRows(views, decision, table), DecoderRows(views, decision)
        for rows in range(1, MAX_DEPTH + 2):
            length = rng.choice([1, 4, 30])
            assert shared.top_sums(rows, length) == own.top_sums(rows, length), (rows, views)
