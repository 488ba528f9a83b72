"""Issue 25: "Multistage blocked streams use an individual future-delivery reference"
(design, "Useful service and selection"; the rule and its measurement: docs/scheduling.md).

A decoder waiting for a restore whose window of images must then be encoded reaches its
next delivery only through its remaining stages, so its age value c * sigma_i * (A_i + T)
uses sigma_i = T + V + G (this stage, the fastest vision program holding its window, the
fastest generation shape), not its family's batch-feasible interval. The chain cohort is
decide's; the bounded search's chain bound reads the same reference
(test_helios_pair_pruning holds it above every chain score).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from helios_helpers import MS, decode, prefill

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios import PolicyConfig
from ignition.helios.config import SpeculationMode
from ignition.helios.decide.policy import (
    CatalogIndex,
    Population,
    active_descriptors,
    all_candidates,
    build_tables,
    select,
)
from ignition.helios.decide.service import Prices
from ignition.helios.decide.state_choice import state_candidates
from ignition.helios.decide.utility import Decision, LaneView
from ignition.helios.state.cost import CostModel
from ignition.helios.types import RequestHandle

RESTORE = Descriptor(GraphKind.RESTORE, 1, 0, 1, 1)
VISION = Descriptor(GraphKind.VISION, 1, 0, 64, 64)
COSTS_MS = {prefill(64): 3.0, decode(1): 2.0, decode(4): 3.0, RESTORE: 1.0, VISION: 5.0}
NOW_NS = 1_000 * MS
AGE_PRICE = 0.1  # c
AGE_MS = 100.0  # A_i
FAMILY_SIGMA_MS = 0.5


def _chained_decoder(sigma_ms: float | None = FAMILY_SIGMA_MS) -> LaneView:
    """A decoder whose restore is pending and whose window (48 patches) is encoded after
    it: restore -> vision -> decode."""
    return LaneView(
        handle=RequestHandle(0, 0),
        epoch=0,
        is_decoder=True,
        prompt_position=10,
        num_prompt_tokens=10,
        remaining_output=50,
        remaining_context=10_000,
        prices=Prices(prefill_token=1.0, output_token=1.0, delivery=1.0),
        age_ms=AGE_MS,
        last_served_seq=0,
        sigma_ms=sigma_ms,
        chained_patches=48,
    )


INFERENCE = (prefill(64), decode(1), decode(4))


def _model(costs_ms: dict[Descriptor, float]) -> CostModel:
    model = CostModel(100 * MS)
    for d, ms in costs_ms.items():
        model.seed(d, round(ms * MS), NOW_NS)
    return model


def _decision(num_active_decoders: int = 1) -> Decision:
    return Decision(
        age_price=AGE_PRICE, num_active_decoders=num_active_decoders, alpha=1.0, log_scale=0.0
    )


def _restore_score(view: LaneView, costs_ms: dict[Descriptor, float] = COSTS_MS) -> float:
    """The restore candidate's score in a decision holding only ``view``."""
    population = Population(prompts=(), decoders=(), pending=(view,))
    descriptors = (*INFERENCE, RESTORE, VISION)
    policy = PolicyConfig(estimate_ttl_ns=100 * MS)
    (candidate,) = state_candidates(
        descriptors, population, _model(costs_ms), _decision(), policy, NOW_NS
    )
    assert candidate.descriptor == RESTORE and candidate.num_lanes == 1
    return candidate.score


def _chain_score(sigma_ms: float) -> float:
    """The design's chain score for the decoder through decode(1) (its best following
    shape: every shape gives one output, the fastest the largest V * T / (T + F)):
    V = output + delivery + c * sigma * (A + T + F), contribution V * T / (T + F), over
    T, minus the waiting cost T / 2 * c of its one active decoder."""
    t, rest = COSTS_MS[RESTORE], COSTS_MS[VISION] + COSTS_MS[decode(1)]
    value = 1.0 + 1.0 + AGE_PRICE * sigma_ms * (AGE_MS + t + rest)
    return value * t / (t + rest) / t - t / 2 * AGE_PRICE


def test_a_multistage_blocked_decoder_is_aged_by_its_own_future_delivery_reference():
    """sigma_i = T + V + G = 1 + 5 + 2 ms, where the family interval is 0.5 ms."""
    individual = COSTS_MS[RESTORE] + COSTS_MS[VISION] + COSTS_MS[decode(1)]
    assert _restore_score(_chained_decoder()) == pytest.approx(_chain_score(individual))
    assert _chain_score(individual) > 5 * _chain_score(FAMILY_SIGMA_MS)  # what it replaces


def test_the_family_interval_does_not_enter_a_multistage_blocked_decoder_value():
    scores = {_restore_score(_chained_decoder(sigma)) for sigma in (0.5, 50.0, None)}
    assert len(scores) == 1


def test_a_slower_remaining_stage_lengthens_the_reference():
    """A slower vision stage delays the next delivery: sigma_i grows with V (and the
    continuation's share T / (T + F) shrinks, as before)."""
    slow = {**COSTS_MS, VISION: 20.0}
    individual = COSTS_MS[RESTORE] + 20.0 + COSTS_MS[decode(1)]
    t, rest = COSTS_MS[RESTORE], 20.0 + COSTS_MS[decode(1)]
    value = 2.0 + AGE_PRICE * individual * (AGE_MS + t + rest)
    expected = value * t / (t + rest) / t - t / 2 * AGE_PRICE
    assert _restore_score(_chained_decoder(), slow) == pytest.approx(expected)


def test_an_unmeasured_stage_invents_no_reference():
    """With the vision program unmeasured the reference cannot be measured: the row keeps
    its family interval, and its unknown continuation compares optimistically by value
    (the candidate's score is its value, V with the age run to the end of this stage)."""
    unmeasured = {d: ms for d, ms in COSTS_MS.items() if d != VISION}
    t = COSTS_MS[RESTORE]
    for sigma in (FAMILY_SIGMA_MS, 2.0):
        expected = 2.0 + AGE_PRICE * sigma * (AGE_MS + t)
        assert _restore_score(_chained_decoder(sigma), unmeasured) == pytest.approx(expected)


def test_the_continuation_of_a_blocked_prompt_row_is_unchanged():
    """Prompt rows have no delivery coordinate (no sigma): only decoders are affected."""
    prompt = replace(_chained_decoder(), is_decoder=False, prompt_position=4, num_prompt_tokens=60)
    t, rest = COSTS_MS[RESTORE], COSTS_MS[VISION] + COSTS_MS[prefill(64)]
    value = 56 * 1.0 + 1.0 + 1.0  # its 56 remaining tokens and the first output, delivered
    expected = value * t / (t + rest) / t - t / 2 * AGE_PRICE
    assert _restore_score(prompt) == pytest.approx(expected)


def test_the_blocked_decoder_restore_goes_before_a_ready_decoder_of_the_same_age():
    """The decision as the definition takes it: a ready decoder of the same age and family
    scores (2 + c * 0.5 * (A + 2)) / 2 - c = 3.35 per ms in the 2 ms decode. Under the
    family interval the blocked decoder's restore would score 0.825; with its own
    reference of 8 ms it scores 10.95 and goes first."""
    ready = replace(_chained_decoder(), handle=RequestHandle(1, 0), chained_patches=0)
    population = Population(prompts=(), decoders=(ready,), pending=(_chained_decoder(),))
    model, decision = _model(COSTS_MS), _decision(num_active_decoders=2)
    index = CatalogIndex(INFERENCE)
    tables = build_tables(index, population, decision, max_depth=0)
    shapes = active_descriptors(index, population)
    inference = all_candidates(shapes, tables, model, decision, NOW_NS, SpeculationMode.ADAPTIVE)
    states = state_candidates(
        (*INFERENCE, RESTORE, VISION),
        population,
        model,
        decision,
        PolicyConfig(estimate_ttl_ns=100 * MS),
        NOW_NS,
    )
    best_inference = select(inference)
    assert best_inference is not None and best_inference.score == pytest.approx(3.35)
    winner = select(inference + states)
    assert winner is not None and winner.descriptor == RESTORE
    assert winner.score == pytest.approx(10.95)
