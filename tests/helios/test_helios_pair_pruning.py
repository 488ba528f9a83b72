"""Issue 10 (10e): the pair lookahead's following shapes are pruned exactly.

state_candidates with a floor skips (prerequisite, following) pairs whose upper bound
(pair_bounds.py) falls clearly below the floor and the best state candidate found so
far; the exhaustive path is decide.state_choice.state_candidates. These tests
hold the two to the same best score and winner on random populations with pending
inits, restores and captures, ready rows and terminal rows, and check the bound itself.
"""

from __future__ import annotations

import math

from helios_helpers import MS, decode, mixed, prefill, spec
from hypothesis import given, settings
from hypothesis import strategies as st

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios import PolicyConfig
from ignition.helios.decide.chains import chain_cohort
from ignition.helios.decide.policy import Population, select
from ignition.helios.decide.service import Prices
from ignition.helios.decide.state_candidates import _pair
from ignition.helios.decide.state_choice import state_candidates as exhaustive_state_candidates
from ignition.helios.decide.state_rows import _enables
from ignition.helios.decide.state_tables import StateTables
from ignition.helios.decide.terminal import TerminalView
from ignition.helios.decide.utility import Candidate, Decision, LaneView
from ignition.helios.fast.pair_bounds import DecoderRows
from ignition.helios.fast.state_search import (
    StateSearch,
    _chain_bound,
    _pair_bounds,
    state_candidates,
)
from ignition.helios.state.cost import CostModel, Freshness
from ignition.helios.types import RequestHandle

INFERENCE = [
    prefill(16),
    prefill(64),
    prefill(256),
    prefill(1024),
    decode(1),
    decode(4),
    decode(16),
    spec(2, 3),
    spec(4, 4, 9),
    mixed(2, 64),
    mixed(4, 256, 2),
    mixed(8, 128),
]
STATE = [Descriptor(k, b, 0, 1, b) for k in (GraphKind.INIT, GraphKind.RESTORE) for b in (1, 4)]
STATE += [Descriptor(GraphKind.SNAPSHOT, b, 0, 1, b) for b in (1, 3)]
STATE += [Descriptor(GraphKind.VISION, 1, 0, p, p) for p in (64, 256)]
NOW_NS = 1_000 * MS
TTL_NS = 100 * MS

prices = st.builds(
    Prices,
    st.floats(0.0, 2.0),
    st.floats(0.0, 40.0),
    st.floats(0.0, 20.0),
)
# (ms, observed recently enough to be fresh); most shapes measured and fresh, so most
# pairs have rates to prune by
costs = st.tuples(st.floats(0.05, 60.0), st.integers(0, 4).map(bool))


@st.composite
def rows(draw, kind: str, slot: int) -> LaneView:
    """One row: a ready prompt or decoder, or a row pending init / restore / capture."""
    prompt = draw(st.integers(2, 3000))
    decoder = kind in ("decoder", "restore-decoder", "chain-decoder")
    position = {
        "prompt": draw(st.integers(0, prompt - 1)),
        "decoder": prompt,
        "init": 0,
        "restore": draw(st.integers(1, prompt - 1)),
        "restore-decoder": prompt,
        "capture": draw(st.integers(1, prompt - 1)),
        "vision": draw(st.integers(0, prompt - 1)),
        "chain": draw(st.integers(1, prompt - 1)),
        "chain-decoder": prompt,
    }[kind]
    # a window's largest image: a pending vision prerequisite, or one after the restore
    # (300 patches: no vision program holds it)
    patches = draw(st.sampled_from([48, 200, 300]))
    capture = (position,) if kind == "capture" else ()
    if kind in ("prompt", "init", "restore") and draw(st.booleans()):
        capture = (draw(st.integers(position + 1, prompt)),)  # a later cut stops the chunk
    return LaneView(
        handle=RequestHandle(slot, 0),
        epoch=0,
        is_decoder=decoder,
        prompt_position=position,
        num_prompt_tokens=prompt,
        remaining_output=draw(st.integers(0 if decoder else 1, 50)),
        remaining_context=10_000,
        prices=draw(prices),
        age_ms=draw(st.floats(0.0, 500.0)),
        last_served_seq=draw(st.integers(0, 5)),
        sigma_ms=draw(st.one_of(st.none(), st.floats(0.5, 30.0))),
        capture_ends=capture,
        vision_patches=patches if kind == "vision" else 0,
        chained_patches=patches if kind.startswith("chain") else 0,
        # speculative following graphs value decoders at their width (state_candidates)
        survivals=tuple(draw(st.lists(st.floats(0.0, 1.0), max_size=3))),
    )


@st.composite
def decisions(draw):
    kinds = ("prompt", "decoder", "init", "restore", "restore-decoder", "capture", "vision")
    kinds += ("chain", "chain-decoder")
    drawn = draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=14))
    views = [draw(rows(kind, slot)) for slot, kind in enumerate(drawn)]
    ready = ("prompt", "decoder")
    terminal = [
        TerminalView(
            RequestHandle(100 + i, 0),
            0,
            draw(st.floats(0.0, 300.0)),
            draw(st.integers(1, 4000)),
            draw(st.integers(0, 5)),
        )
        for i in range(draw(st.integers(0, 4)))
    ]
    population = Population(
        prompts=tuple(v for v, k in zip(views, drawn, strict=True) if k == "prompt"),
        decoders=tuple(v for v, k in zip(views, drawn, strict=True) if k == "decoder"),
        pending=tuple(v for v, k in zip(views, drawn, strict=True) if k not in ready),
        terminal=tuple(terminal),
    )
    decision = Decision(
        age_price=draw(st.sampled_from([0.0, 0.001, 0.1])),
        num_active_decoders=len(population.decoders),
        alpha=0.5,
        log_scale=0.0,
        terminal_age_price=draw(st.sampled_from([0.0, 0.01, 1.0])),
        num_terminal=len(terminal),
    )
    model = CostModel(TTL_NS)
    some_unmeasured = draw(st.booleans())
    for d in (*INFERENCE, *STATE):
        ms, fresh = draw(costs)
        if not (some_unmeasured and draw(st.integers(0, 7)) == 0):
            model.seed(d, max(1, round(ms * MS)), NOW_NS if fresh else 0)
    policy = PolicyConfig(
        estimate_ttl_ns=TTL_NS,
        terminal_value=draw(st.sampled_from([0.0, 256.0, 5000.0])),
    )
    return population, decision, model, policy


def _candidates(case, floor: float | None) -> list[Candidate]:
    population, decision, model, policy = case
    args = ((*INFERENCE, *STATE), population, model, decision, policy, NOW_NS)
    if floor is None:
        return exhaustive_state_candidates(*args)
    return state_candidates(*args, floor)


def _same(a: Candidate | None, b: Candidate | None) -> bool:
    if a is None or b is None:
        return a is b
    return (
        a.descriptor == b.descriptor
        and a.work_key == b.work_key
        and a.score == b.score
        and a.total_value == b.total_value
        and a.num_lanes == b.num_lanes
        and a.freshness is b.freshness
    )


def _reaches(score: float, floor: float) -> bool:
    """At or above ``floor`` but for rounding: the pruning must keep such a winner."""
    return score >= floor - 1e-9 * max(1.0, abs(floor))


def _clearly_below(score: float, floor: float) -> bool:
    """Below ``floor`` by more than the pruning margin (1e-6) and the ranking's ties
    (1e-9): neither such a winner nor what ties with it can beat the floor. Between the
    two the floor sits inside the margin, where either outcome is exact."""
    return score < floor - 1e-5 * max(1.0, abs(floor))


def _best_known(found: list[Candidate]) -> float:
    return max((c.score for c in found if not c.is_indeterminate), default=-math.inf)


@settings(max_examples=150, deadline=None)
@given(case=decisions())
def test_pruned_state_candidates_have_the_exhaustive_best_score_and_winner(case):
    """No floor but the state candidates' own best: the same winner and best score."""
    exhaustive = _candidates(case, None)
    pruned = _candidates(case, -math.inf)
    assert _same(select(pruned), select(exhaustive))
    assert _best_known(pruned) == _best_known(exhaustive)
    # unknown durations are never pruned by a rate: the same indeterminate candidates
    unknown = [c for c in exhaustive if c.is_indeterminate]
    assert len(unknown) == sum(1 for c in pruned if c.is_indeterminate)
    for c in unknown:
        assert any(_same(c, p) for p in pruned)


@settings(max_examples=150, deadline=None)
@given(case=decisions(), offset=st.floats(-2.0, 2.0))
def test_a_pair_below_the_inference_incumbent_is_pruned_only_where_it_cannot_win(case, offset):
    """With the inference incumbent as floor: the winner is unchanged wherever it can
    beat the incumbent (a floor at the exhaustive best itself included: ties survive),
    nothing pruned rises above a floor it could not reach, and every stale candidate
    (what timing refresh chooses among) is the exhaustive one."""
    exhaustive = _candidates(case, None)
    best = _best_known(exhaustive)
    floors = [best * (1 + offset), best + offset] if math.isfinite(best) else [offset]
    winner = select(exhaustive)
    for floor in floors:
        pruned = _candidates(case, floor)
        if winner is not None and (winner.is_indeterminate or _reaches(winner.score, floor)):
            assert _same(select(pruned), winner)
        elif winner is None or _clearly_below(winner.score, floor):
            assert _best_known(pruned) < floor
        assert _best_known(pruned) <= best
        for c in exhaustive:  # timing refresh runs the stale candidate it picks
            if c.freshness is Freshness.STALE:
                assert any(_same(c, p) for p in pruned)


@settings(max_examples=100, deadline=None)
@given(case=decisions(), hint=st.floats(-5.0, 5.0), offset=st.floats(-2.0, 2.0))
def test_the_search_resumed_after_its_provisional_pairs_selects_the_same_winner(case, hint, offset):
    """plan(): each prerequisite's best-bound pair first (its scores bound the inference
    search from below), then the rest against the inference incumbent: each final
    candidate outranks its provisional one and the winner is unchanged."""
    population, decision, model, policy = case
    exhaustive = _candidates(case, None)
    winner = select(exhaustive)
    best = _best_known(exhaustive)
    floor = best + offset if math.isfinite(best) else offset
    search = StateSearch((*INFERENCE, *STATE), population, model, decision, policy, NOW_NS)
    provisional = search.provisional(hint)
    final = search.candidates(floor)
    finals = {c.descriptor: c for c in final}
    for c in provisional:  # each final candidate outranks its provisional one
        last = finals[c.descriptor]
        assert last.is_indeterminate or (not c.is_indeterminate and last.score >= c.score)
    if winner is not None and (winner.is_indeterminate or _reaches(winner.score, floor)):
        assert _same(select(final), winner)
    elif winner is None or _clearly_below(winner.score, floor):
        assert _best_known(final) < floor


@settings(max_examples=100, deadline=None)
@given(case=decisions())
def test_every_pair_score_stays_within_its_bound(case):
    """pair_bounds.py: no (prerequisite, following) pair's score exceeds its bound, nor a
    measured chain cohort's score its bound."""
    population, decision, model, policy = case
    snapshots = [d for d in STATE if d.kind is GraphKind.SNAPSHOT]
    tables = StateTables(population, INFERENCE, snapshots, model, decision, policy)
    tables.vision = [d for d in STATE if d.kind is GraphKind.VISION]
    measured = [
        (i, f, model.estimate_ns(f) / 1e6) for i, f in enumerate(INFERENCE) if model.estimate_ns(f)
    ]
    for d in STATE:
        t_ms = model.estimate_ns(d) / 1e6
        if t_ms <= 0:
            continue
        enabled = [v for v in population.pending if _enables(v, d)]
        chained = [v for v in enabled if v.chained_patches]
        chain = chain_cohort(d, tables, chained, t_ms) if chained else None
        chain_bound = _chain_bound(d, tables, chained, t_ms) if chained else None
        if chain is not None and chain_bound is not None:
            assert chain[3] and chain[0] <= chain_bound + 1e-9 * max(1.0, abs(chain_bound))
        enabled = [v for v in enabled if not v.chained_patches]
        terminal = list(population.terminal) if d.kind is GraphKind.SNAPSHOT else []
        ready = DecoderRows(population.decoders, decision)  # as the search builds them
        bounds = _pair_bounds(d, tables, enabled, terminal, t_ms, ready)
        ranked = {position: -negative for negative, position, _ in bounds.ranked(measured, t_ms)}
        for position, following, f_ms in measured:  # the hot loop is the readable bound
            readable = bounds.score(following, t_ms, f_ms)
            if readable is None:
                assert position not in ranked
            else:
                assert math.isclose(ranked[position], readable, rel_tol=1e-12, abs_tol=1e-12)
        for position, following, _ in measured:
            best = _Recorder()
            _pair(d, tables, position, following, enabled, terminal, t_ms, best)
            for score in best.scores:
                assert position in ranked, f"{d.name} -> {following.name} scored {score}"
                bound = ranked[position]
                assert score <= bound + 1e-9 * max(1.0, abs(bound)), (d.name, following.name)


class _Recorder:
    """Stands in for the lookahead's best entry and keeps every measured pair score."""

    def __init__(self) -> None:
        self.scores: list[float] = []

    def consider(self, position, score, lanes, retire, value, known: bool) -> None:
        if known:
            self.scores.append(score)


def test_a_stale_prerequisite_keeps_its_own_best_candidate_whatever_the_floor():
    """Timing refresh chooses among stale candidates and runs the one it picks: a stale
    prerequisite's pairs are pruned only by its own best, never by the floor."""
    init = STATE[0]
    model = CostModel(TTL_NS)
    model.seed(init, 1 * MS, 0)  # observed long ago: stale now
    model.seed(prefill(64), 5 * MS, NOW_NS)
    view = LaneView(
        handle=RequestHandle(0, 0),
        epoch=0,
        is_decoder=False,
        prompt_position=0,
        num_prompt_tokens=64,
        remaining_output=4,
        remaining_context=10_000,
        prices=Prices(1.0, 10.0, 1.0),
        age_ms=0.0,
        last_served_seq=0,
    )
    population = Population(prompts=(), decoders=(), pending=(view,))
    decision = Decision(0.1, 0, 0.5, 0.0)
    assert model.freshness(init, NOW_NS) is Freshness.STALE
    args = ((prefill(64), init), population, model, decision, PolicyConfig(), NOW_NS)
    exhaustive = exhaustive_state_candidates(*args)
    pruned = state_candidates(*args, 1e12)
    assert len(exhaustive) == 1 and _same(pruned[0], exhaustive[0])


def test_a_winner_short_of_pages_yields_as_the_exhaustive_path_decides():
    """plan() prunes pairs below the incumbent, but a winner its pages cannot cover yields
    to the best state operation that fits, which needs every state shape's own best: the
    plan is the definition's, decide.selector.Exhaustive (a fresh request awaits its init,
    a preempted one its retirement, no page is free)."""
    from helios_helpers import Driver, request, scheduler

    from ignition.components.state_programs import INIT, RESTORE, SNAPSHOT
    from ignition.helios import Resources
    from ignition.helios.config import policy_from_preset
    from ignition.helios.decide.selector import Exhaustive

    costs = {prefill(64): 40.0, decode(1): 2.0, decode(2): 2.4, mixed(2, 64): 40.0}
    costs |= {SNAPSHOT: 0.5, RESTORE: 0.5, INIT: 0.05}
    pool = Resources(num_request_slots=4, num_pages=4, page_size_tokens=64)
    cheap = policy_from_preset("balanced", terminal_value=1e-3, terminal_age_price=0.0)
    s = scheduler(list(costs), costs, resources=pool, policy=cheap)
    driver = Driver(s)
    s.admit(request(prompt=64, output=200))
    b = s.admit(request(prompt=64, output=200))
    driver.run_until_out_of_pages()
    s.admit(request(prompt=64, output=8))
    s.preempt(b)
    assert s.pool.num_free_pages == 0 and s.queue.is_empty
    reference = s.plan_with(Exhaustive(), record=False)
    plan = s.plan()
    assert plan is not None and reference is not None
    assert plan.descriptor.kind in (GraphKind.INIT, GraphKind.SNAPSHOT)
    assert plan.descriptor == reference.descriptor
    assert [(x.handle, x.role) for x in plan.lanes] == [(x.handle, x.role) for x in reference.lanes]
    assert math.isclose(plan.value_rate, reference.value_rate, rel_tol=1e-9)
