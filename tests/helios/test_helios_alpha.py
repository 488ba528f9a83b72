"""adaptive_verification_alpha in the decode cohort (design, "Speculative graph coverage":
"Speculative selection scores raise each s_i to the exponent adaptive_verification_alpha";
rounds.py: "adaptive host allocation fixes lengths from acceptance estimates before any
proposal is drawn, giving each extra row to the highest marginal value").

Two decoders whose output prices differ: under alpha = 2 the extra row of a ragged graph
is worth 1 * 0.9^2 = 0.81 to the first and 2 * 0.5^2 = 0.5 to the second, so it goes
to the first; with the survivals not raised (0.9 against 1.0) it would go to the second.
Both tables are checked: the definition's (decide.rounds.LaneTable) and the bounded
search's (fast.lane_table.LaneTable), which share the ragged allocation
(decide.rounds.speculative_cohort) but keep their own expected-output tables. The same
exponent values a blocked decoder's following graph (the prerequisite pair) and the
optimistic estimate an acceptance probe is scored with.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from exploration_helpers import LEARNING, MS, ORDINARY, Runner
from helios_helpers import decode, prefill, scheduler, spec

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios import HEAD_DRAFTS, PolicyConfig
from ignition.helios.config import SpeculationMode
from ignition.helios.decide import rounds
from ignition.helios.decide.policy import Population
from ignition.helios.decide.selector import Exhaustive
from ignition.helios.decide.service import Prices
from ignition.helios.decide.state_choice import state_candidates
from ignition.helios.decide.utility import Decision, LaneView
from ignition.helios.fast import lane_table
from ignition.helios.state.acceptance import PopulationPrior, PrefixHistory
from ignition.helios.state.cost import CostModel
from ignition.helios.types import RequestHandle

ALPHA = 2.0
TABLES = [rounds.LaneTable, lane_table.LaneTable]


def _decoder(slot: int, output_price: float, survivals: tuple[float, ...]) -> LaneView:
    return LaneView(
        handle=RequestHandle(slot, 0),
        epoch=0,
        is_decoder=True,
        prompt_position=8,
        num_prompt_tokens=8,
        remaining_output=100,
        remaining_context=10_000,
        prices=Prices(prefill_token=1.0, output_token=output_price, delivery=0.0),
        age_ms=0.0,
        last_served_seq=slot,
        survivals=survivals,
    )


def _cohort(table_type, views, d):
    decision = Decision(age_price=0.0, num_active_decoders=len(views), alpha=ALPHA, log_scale=0.0)
    table = table_type(views, decision, max_depth=d.proposal_depth)
    cohort = table.cohort(d, SpeculationMode.ADAPTIVE, 2.0)
    assert cohort is not None
    return cohort, {p.view.handle.slot: p for p in cohort.build()}


@pytest.mark.parametrize("table_type", TABLES, ids=["decide", "fast"])
def test_a_ragged_graph_gives_its_extra_row_to_the_highest_alpha_raised_marginal_value(
    table_type,
):
    """spec(B=2, W=2, P=3): one row each and one extra row. The first decoder's second
    row is worth 1 * 0.9^2 = 0.81, the second's 2 * 0.5^2 = 0.5: the first gets it, and
    the cohort is worth 1 * (1 + 0.81) + 2 * 1 = 3.81."""
    views = [_decoder(0, 1.0, (0.9,)), _decoder(1, 2.0, (0.5,))]
    cohort, picks = _cohort(table_type, views, spec(2, 2, 3))
    assert {slot: p.query_length for slot, p in picks.items()} == {0: 2, 1: 1}
    assert picks[0].expected_output == pytest.approx(1 + 0.9**ALPHA)
    assert cohort.total_value == pytest.approx(1.0 * (1 + 0.9**ALPHA) + 2.0 * 1)


@pytest.mark.parametrize("table_type", TABLES, ids=["decide", "fast"])
def test_an_unconstrained_cohort_is_worth_its_alpha_raised_survivals(table_type):
    """spec(B=2, W=3, P=6): the budget does not bind, each decoder verifies three rows
    and is worth price * (1 + s_1^alpha + s_2^alpha)."""
    views = [_decoder(0, 1.0, (0.9, 0.8)), _decoder(1, 2.0, (0.5, 0.5))]
    cohort, picks = _cohort(table_type, views, spec(2, 3))
    assert {slot: p.query_length for slot, p in picks.items()} == {0: 3, 1: 3}
    first, second = 1 + 0.9**ALPHA + 0.8**ALPHA, 1 + 2 * 0.5**ALPHA
    assert picks[0].expected_output == pytest.approx(first)
    assert cohort.total_value == pytest.approx(1.0 * first + 2.0 * second)


def test_a_decoder_blocked_by_a_capture_is_valued_at_its_alpha_raised_survivals():
    """The prerequisite pair (a capture at the prompt's end, then spec(B=1, W=3)) values
    the decoder at the following graph's three rows: V = 1 * (1 + 0.9^2 + 0.8^2), the
    pair scored V / (T + F) without age or waiting prices."""
    snapshot, following = Descriptor(GraphKind.SNAPSHOT, 1, 0, 1, 1), spec(1, 3)
    view = replace(_decoder(0, 1.0, (0.9, 0.8)), capture_ends=(8,))
    model = CostModel(100 * MS)
    model.seed(snapshot, 1 * MS, 0)
    model.seed(following, 4 * MS, 0)
    decision = Decision(age_price=0.0, num_active_decoders=1, alpha=ALPHA, log_scale=0.0)
    population = Population(prompts=(), decoders=(), pending=(view,))
    policy = PolicyConfig(estimate_ttl_ns=100 * MS)
    (pair,) = state_candidates((following, snapshot), population, model, decision, policy, 0)
    assert pair.descriptor == snapshot
    assert pair.score == pytest.approx((1 + 0.9**ALPHA + 0.8**ALPHA) / (1.0 + 4.0))


def test_the_optimistic_outputs_raise_each_optimistic_survival_to_alpha():
    history = PrefixHistory(PopulationPrior(), (0.25, 0.1))
    optimistic = history.optimistic_survivals(2)
    assert history.optimistic_outputs(2, ALPHA) == pytest.approx(
        (0.0, 1.0, 1 + optimistic[0] ** ALPHA, 1 + sum(x**ALPHA for x in optimistic))
    )


def _probe_setup(alpha: float):
    """Funded learning (design, "Funded acceptance learning"): one decoder whose history
    says drafts never survive (optimistic estimate 0.865 at both depths), a 10 ms decode
    and a 24.5 ms width-three speculative graph, full learning credit."""
    costs = {prefill(64): 1.0, decode(1): 10.0, spec(1, 3): 24.5}
    s = scheduler(list(costs), costs, policy=PolicyConfig(adaptive_verification_alpha=alpha))
    Runner(s).decoding(1, acceptance_prior=(0.0, 0.0), output=1000)
    s.learning.earn(10_000 * MS)
    return s


def test_a_probe_is_scored_with_its_optimistic_survivals_raised_to_alpha():
    """Under alpha = 0.5 the optimistic rows are worth 0.865^0.5 = 0.93 each, enough for
    the probe to beat the decode; under alpha = 1 (0.865 each) it is not offered. Both
    selectors: plan()'s bounded search and the definition."""
    s = _probe_setup(0.5)
    (h,) = s.requests
    optimistic = s.requests[h].acceptance.history(HEAD_DRAFTS).optimistic_survivals(2)
    for plan in (s.plan(), s.plan_with(Exhaustive(), record=False)):
        assert plan.execution_class is LEARNING and plan.descriptor == spec(1, 3)
        (lane,) = plan.lanes
        assert lane.expected_output_tokens == pytest.approx(1 + sum(x**0.5 for x in optimistic))
    s = _probe_setup(1.0)
    for plan in (s.plan(), s.plan_with(Exhaustive(), record=False)):
        assert plan.execution_class is ORDINARY and plan.descriptor == decode(1)
