"""Helios schedules prerequisites and terminal work (design: "Prerequisites and
completion"): restore before prefill, intermediate snapshots, terminal retirement,
preemption, and the fenced ownership of each."""

from __future__ import annotations

import math

import pytest

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios import (
    CompletionRecord,
    CompletionReport,
    ExecutionTiming,
    Fence,
    LaneRole,
    SchedulerError,
)
from ignition.helios.config import policy_from_preset
from ignition.helios.decide.state_rows import following_rows, terminal_sigma_ms
from ignition.helios.decide.terminal import TerminalPrices, terminal_lane_value
from ignition.helios.plans import ExecutionClass
from ignition.helios.state.cost import CostModel
from ignition.helios.state.rates import decay
from tests.helios.helios_helpers import (
    MS,
    Driver,
    decode,
    mixed,
    prefill,
    request,
    scheduler,
    spec,
)

SNAPSHOT = Descriptor(GraphKind.SNAPSHOT, 1, 0, 1, 1)
RESTORE = Descriptor(GraphKind.RESTORE, 1, 0, 1, 1)


def _catalog(snapshot_ms: float = 0.5, restore_ms: float = 0.5, decode_ms=(2.0, 2.4)):
    costs = {
        prefill(64): 3.0,
        decode(1): decode_ms[0],
        decode(2): decode_ms[1],
        SNAPSHOT: snapshot_ms,
        RESTORE: restore_ms,
    }
    return list(costs), costs


def _complete_empty(s, plan, fence: int, ms: float = 1.0) -> None:
    records = [CompletionRecord(lane.handle) for lane in plan.lanes]
    s.complete(Fence(fence), CompletionReport(records, ExecutionTiming(round(ms * MS))))


def _run_until_decoder(driver: Driver, handle) -> None:
    for _ in range(10):
        if driver.s.requests[handle].is_decoder:
            return
        driver.step()
    raise AssertionError("the request never became a decoder")


def test_a_retained_prefix_is_restored_as_a_prerequisite_then_only_the_rest_prefilled():
    descriptors, costs = _catalog()
    s = scheduler(descriptors, costs)
    h = s.admit(request(prompt=100, output=4, restore_tokens=80))
    plan = s.plan()
    assert plan is not None and plan.kind is GraphKind.RESTORE
    (lane,) = plan.lanes
    assert lane.role is LaneRole.RESTORE and lane.checkpoint_tokens == 80
    s.commit(plan, Fence(1))
    assert s.requests[h].num_pages == s.pool.pages_for(80)  # restore writes its pages
    _complete_empty(s, plan, 1)
    assert s.requests[h].prompt_position == 80
    after = s.plan()
    assert after is not None and after.kind is GraphKind.PREFILL
    assert after.lanes[0].num_prompt_tokens == 20


def test_restored_prompt_history_earns_no_token_service():
    descriptors, costs = _catalog()
    s = scheduler(descriptors, costs)
    h = s.admit(request(prompt=100, output=4, restore_tokens=80))
    plan = s.plan()
    s.commit(plan, Fence(1))
    # the newcomer start of its 20 uncached tokens (helios/state/prompt_starts.py)
    x0 = s.queue.head().norms.start_rate(20)
    _complete_empty(s, plan, 1)
    a = decay(1.0, s.policy.adaptation_ms)
    assert s.requests[h].rates.token_rate == pytest.approx(a * x0)  # a zero-token interval


def test_state_operation_records_commit_no_tokens():
    descriptors, costs = _catalog()
    s = scheduler(descriptors, costs)
    h = s.admit(request(prompt=100, output=4, restore_tokens=80))
    plan = s.plan()
    s.commit(plan, Fence(1))
    with pytest.raises(SchedulerError, match="commits no tokens"):
        s.complete(Fence(1), CompletionReport([CompletionRecord(h, 0, (3,))], ExecutionTiming(MS)))


def test_prefill_is_cut_at_a_capture_end_and_snapshotted_before_it_continues():
    descriptors, costs = _catalog()
    s = scheduler(descriptors, costs)
    h = s.admit(request(prompt=60, output=4, capture_ends=(40, 60)))
    driver = Driver(s)
    first = driver.step()
    assert first.kind is GraphKind.PREFILL and first.lanes[0].num_prompt_tokens == 40
    capture = driver.step()
    assert capture.kind is GraphKind.SNAPSHOT
    assert capture.lanes[0].role is LaneRole.SNAPSHOT and capture.lanes[0].checkpoint_tokens == 40
    rest = driver.step()
    assert rest.kind is GraphKind.PREFILL and rest.lanes[0].num_prompt_tokens == 20
    end_capture = driver.step()
    assert end_capture.kind is GraphKind.SNAPSHOT and end_capture.lanes[0].checkpoint_tokens == 60
    assert driver.step().kind is GraphKind.DECODE
    assert s.requests[h].captured == {40, 60}


def _decoder_and_capture(snapshot_ms: float):
    """A ready decoder A and a request B that stands at its prompt-end capture."""
    descriptors, costs = _catalog(snapshot_ms=snapshot_ms)
    s = scheduler(descriptors, costs)
    driver = Driver(s)
    a = s.admit(request(prompt=64, output=1000))
    _run_until_decoder(driver, a)
    b = s.admit(request(prompt=64, output=1000, capture_ends=(64,)))
    for _ in range(20):
        plan = s.plan()
        if plan.kind is GraphKind.PREFILL or plan.lane_of(b) is not None:
            break
        driver.step()
    driver.step()  # B's prefill (alone or mixed into nothing: the catalog has no mixed)
    assert s.requests[b].pending_capture == 64
    return s, a, b


@pytest.mark.parametrize(("snapshot_ms", "wins"), [(0.2, True), (40.0, False)])
def test_enabling_a_shared_decode_batch_wins_only_with_sufficient_sequence_value(snapshot_ms, wins):
    """A separate test varies snapshot cost to check that enabling a shared decode batch
    wins only when the complete sequence has sufficient value per time."""
    s, a, _ = _decoder_and_capture(snapshot_ms)
    plan = s.plan()
    assert plan is not None
    assert (plan.kind is GraphKind.SNAPSHOT) == wins
    if not wins:
        assert plan.kind is GraphKind.DECODE and plan.lane_of(a) is not None


def test_the_plan_keeps_only_the_prerequisite_duration():
    """Lookahead time must not enter execution timing or cost learning."""
    s, _, _ = _decoder_and_capture(0.2)
    plan = s.plan()
    assert plan.kind is GraphKind.SNAPSHOT
    assert plan.estimated_duration_ns == round(0.2 * MS)


def _terminal_pending(policy=None, snapshot_ms: float = 0.5, decode_first: int = 0):
    """Request T finished and awaits terminal retirement; decoder D is ready (and has
    decoded alone for ``decode_first`` rounds before T arrived)."""
    descriptors, costs = _catalog(snapshot_ms=snapshot_ms)
    s = scheduler(descriptors, costs, policy=policy)
    driver = Driver(s)
    d = s.admit(request(prompt=64, output=1000))
    _run_until_decoder(driver, d)
    for _ in range(decode_first):
        driver.step()
    t = s.admit(request(prompt=64, output=1, terminal_snapshot=True))
    for _ in range(10):
        driver.step()
        if s.requests[t].is_terminal_pending:
            break
    assert s.requests[t].is_terminal_pending
    return s, driver, t, d


def test_validated_termination_starts_terminal_retirement_and_keeps_resources():
    s, _, t, _ = _terminal_pending()
    r = s.requests[t]
    assert not r.is_live and r.terminal_since_ns >= 0
    assert s.pool.is_current(t) and r.num_pages > 0


def test_terminal_snapshot_completion_frees_the_request():
    s, driver, t, _ = _terminal_pending(policy_from_preset("balanced", terminal_value=1e6))
    plan = driver.step()
    assert plan.kind is GraphKind.SNAPSHOT and plan.lanes[0].role is LaneRole.TERMINAL
    assert t not in s.requests and not s.pool.is_current(t)


@pytest.mark.parametrize("preset", ["balanced", "throughput"])
def test_terminal_value_changes_the_decision_under_both_policies(preset):
    """Both balanced and throughput policies apply terminal value; the CLI override
    (policy_from_preset, applied after the preset) takes effect."""
    low, _, _, _ = _terminal_pending(
        policy_from_preset(preset, terminal_value=0.0, terminal_age_price=0.0)
    )
    high, _, _, _ = _terminal_pending(policy_from_preset(preset, terminal_value=1e5))
    assert low.plan().kind is GraphKind.DECODE
    assert high.plan().kind is GraphKind.SNAPSHOT


def test_terminal_age_makes_a_waiting_retirement_win():
    """terminal_value + terminal_age_price * sigma * (A + T): age accumulates from
    validated completion until the retirement outranks decode."""
    policy = policy_from_preset("balanced", terminal_value=0.0, terminal_age_price=1.0)
    s, driver, t, _ = _terminal_pending(policy)
    assert s.plan().kind is GraphKind.DECODE
    for _ in range(200):
        plan = driver.step()
        if plan.kind is GraphKind.SNAPSHOT:
            break
    else:
        raise AssertionError("the retirement never won")
    assert plan.lanes[0].role is LaneRole.TERMINAL
    assert t not in s.requests


def test_the_terminal_clock_starts_when_validated_completion_identifies_termination():
    """Its age starts when validated completion identifies termination: a request that
    terminates after a long busy period starts its retirement at age zero, so with no
    terminal value the decoder still outranks the retirement."""
    policy = policy_from_preset("balanced", terminal_value=0.0, terminal_age_price=1.0)
    s, driver, t, _ = _terminal_pending(policy, decode_first=200)
    assert s.requests[t].terminal_since_ns == driver.now > 400 * MS
    assert s.plan().kind is GraphKind.DECODE


def test_queued_work_and_publication_do_not_reset_the_terminal_clock():
    s, driver, t, _ = _terminal_pending(
        policy_from_preset("balanced", terminal_value=0.0, terminal_age_price=0.0)
    )
    since = s.requests[t].terminal_since_ns
    driver.step()
    driver.step()
    assert s.requests[t].terminal_since_ns == since


def test_terminal_age_coefficient_enters_every_candidates_waiting_cost():
    policy = policy_from_preset("balanced", terminal_value=0.0, terminal_age_price=2.0)
    with_terminal, _, _, _ = _terminal_pending(policy)
    plan = with_terminal.plan()
    assert plan.kind is GraphKind.DECODE
    # The same decode plan without the pending retirement.
    with_terminal.retire_without_snapshot(
        next(iter(h for h, r in with_terminal.requests.items() if r.is_terminal_pending))
    )
    alone = with_terminal.plan()
    assert alone.kind is GraphKind.DECODE and alone.descriptor == plan.descriptor
    unscaled = (alone.value_rate - plan.value_rate) / math.exp(plan.log_scale)
    t_ms = plan.estimated_duration_ns / 1e6
    assert unscaled == pytest.approx(t_ms / 2 * 2.0, rel=1e-6)


def test_preemption_retires_a_resident_request_without_completing_its_response():
    descriptors, costs = _catalog()
    s = scheduler(descriptors, costs, policy=policy_from_preset("balanced", terminal_value=1e5))
    driver = Driver(s)
    h = s.admit(request(prompt=64, output=1000))
    _run_until_decoder(driver, h)
    s.preempt(h)
    r = s.requests[h]
    assert not r.is_live and not r.is_finished and r.terminal_since_ns == s.now_ns
    plan = driver.step()
    assert plan.kind is GraphKind.SNAPSHOT and plan.lanes[0].role is LaneRole.TERMINAL
    assert plan.lanes[0].checkpoint_tokens == r.context_tokens - 1
    assert h not in s.requests


def test_preempting_a_request_with_queued_work_is_refused():
    descriptors, costs = _catalog()
    s = scheduler(descriptors, costs)
    h = s.admit(request(prompt=64, output=1000))
    plan = s.plan()
    s.commit(plan, Fence(1))
    with pytest.raises(SchedulerError, match="idle live request"):
        s.preempt(h)


def test_cancellation_during_a_restore_keeps_ownership_through_its_fence():
    """Error and cancellation paths preserve fenced resource ownership."""
    descriptors, costs = _catalog()
    s = scheduler(descriptors, costs)
    h = s.admit(request(prompt=100, output=4, restore_tokens=80))
    plan = s.plan()
    s.commit(plan, Fence(1))
    s.cancel(h)
    assert s.pool.is_current(h) and s.requests[h].num_pages > 0
    free = s.pool.num_free_pages
    _complete_empty(s, plan, 1)
    assert not s.pool.is_current(h) and h not in s.requests
    assert s.pool.num_free_pages > free


def test_cancelling_a_pending_retirement_releases_it():
    s, _, t, _ = _terminal_pending(
        policy_from_preset("balanced", terminal_value=0.0, terminal_age_price=0.0)
    )
    s.cancel(t)
    assert t not in s.requests and not s.pool.is_current(t)


def test_a_stale_state_plan_is_refused_at_commit():
    descriptors, costs = _catalog()
    s = scheduler(descriptors, costs)
    h = s.admit(request(prompt=100, output=4, restore_tokens=80))
    plan = s.plan()
    s.cancel(h)
    with pytest.raises(SchedulerError):
        s.commit(plan, Fence(1))


def test_a_restore_enables_the_prompt_row_of_a_following_mixed_graph():
    """For a prerequisite followed by mixed inference the prompt can be enabled by it;
    the ready decoder shares the following graph."""
    from tests.helios.helios_helpers import mixed

    costs = {prefill(64): 3.0, decode(1): 2.0, mixed(2, 64): 2.5, SNAPSHOT: 0.3, RESTORE: 0.3}
    s = scheduler(list(costs), costs)
    driver = Driver(s)
    a = s.admit(request(prompt=64, output=1000))
    _run_until_decoder(driver, a)
    b = s.admit(request(prompt=100, output=8, restore_tokens=40))
    first = driver.step()
    assert first.kind is GraphKind.RESTORE and first.lane_of(b) is not None
    following = s.plan()
    assert following.kind is GraphKind.MIXED
    assert following.lane_of(b).role is LaneRole.PROMPT
    assert following.lane_of(b).num_prompt_tokens == 60
    assert following.lane_of(a).role is LaneRole.DECODE


def test_a_winner_short_of_pages_yields_to_the_preemption_snapshot_that_frees_them():
    """Preemption retires a resident request through a terminal snapshot; while the
    decode that wins on value cannot get its pages, the fitting retirement runs."""
    from ignition.helios import Resources

    descriptors, costs = _catalog()
    pool = Resources(num_request_slots=4, num_pages=4, page_size_tokens=64)
    cheap = policy_from_preset("balanced", terminal_value=1e-3, terminal_age_price=0.0)
    s = scheduler(descriptors, costs, resources=pool, policy=cheap)  # decode wins on value
    driver = Driver(s)
    a, b = s.admit(request(prompt=64, output=200)), s.admit(request(prompt=64, output=200))
    driver.run_until_out_of_pages()
    assert s.pool.num_free_pages == 0 and s.queue.is_empty
    s.preempt(b)
    plan = s.plan()
    assert plan.kind is GraphKind.SNAPSHOT
    assert [(lane.handle, lane.role) for lane in plan.lanes] == [(b, LaneRole.TERMINAL)]
    s.commit(plan, Fence(driver.fence + 1))
    _complete_empty(s, plan, driver.fence + 1)
    assert b not in s.requests and s.pool.num_free_pages > 0
    after = s.plan()
    assert after.kind is GraphKind.DECODE and [lane.handle for lane in after.lanes] == [a]


def test_an_unmeasured_snapshot_family_has_no_reference_interval():
    """Unknown snapshot timings follow the discovery rules; no duration or reference
    interval is invented: sigma comes from measured snapshot shapes only."""
    wide = Descriptor(GraphKind.SNAPSHOT, 4, 0, 1, 4)
    costs = CostModel(30_000_000_000)
    assert terminal_sigma_ms([SNAPSHOT, wide], costs, num_terminal=2) is None
    costs.observe(wide, 6 * MS, now_ns=0)
    # only the measured shape counts: K * T / min(B, K) = 2 * 6 / 2
    assert terminal_sigma_ms([SNAPSHOT, wide], costs, num_terminal=2) == pytest.approx(6.0)


def test_without_a_reference_interval_terminal_age_adds_no_value():
    prices = TerminalPrices(value=256.0, age_price=1.0)
    assert terminal_lane_value(prices, None, age_ms=1e6, duration_ms=5.0) == 256.0
    assert terminal_lane_value(prices, 2.0, age_ms=10.0, duration_ms=5.0) == 256.0 + 2.0 * 15.0


def test_an_unmeasured_terminal_snapshot_is_discovered_without_an_invented_duration():
    descriptors, costs = _catalog()
    costs[SNAPSHOT] = None
    s = scheduler(descriptors, costs, policy=policy_from_preset("balanced", terminal_value=1e5))
    driver = Driver(s)
    t = s.admit(request(prompt=64, output=1, terminal_snapshot=True))
    while not s.requests[t].is_terminal_pending:
        driver.step()
    plan = s.plan()
    assert plan.kind is GraphKind.SNAPSHOT and plan.lanes[0].role is LaneRole.TERMINAL
    assert plan.execution_class is ExecutionClass.DISCOVERY
    assert plan.estimated_duration_ns == 0


def test_newly_enabled_decoders_join_a_mixed_following_graph_beside_an_enabled_prompt_row():
    """For a prerequisite followed by mixed inference the prompt can be enabled by the
    prerequisite, and the decode rows it enables too share the following graph: one
    two-row snapshot captures B (at its prompt end: it then decodes) and C (cut before
    its second chunk), and the mixed graph decodes B beside C's prompt row."""
    snapshot2 = Descriptor(GraphKind.SNAPSHOT, 2, 0, 1, 2)
    costs = {prefill(64): 3.0, decode(1): 2.0, decode(2): 2.4, mixed(2, 64): 3.0, snapshot2: 0.5}
    s = scheduler(list(costs), costs)
    driver = Driver(s)
    b = s.admit(request(prompt=64, output=1000, capture_ends=(64,)))
    c = s.admit(request(prompt=128, output=1000, capture_ends=(64,)))
    while s.requests[b].pending_capture is None or s.requests[c].pending_capture is None:
        assert driver.step().kind is GraphKind.PREFILL
    snapshot = driver.step()
    assert snapshot.kind is GraphKind.SNAPSHOT
    assert {lane.handle for lane in snapshot.lanes} == {b, c}
    following = driver.step()
    assert following.kind is GraphKind.MIXED
    roles = {lane.handle: lane.role for lane in following.lanes}
    assert roles == {b: LaneRole.DECODE, c: LaneRole.PROMPT}


def test_a_following_graph_is_valued_at_its_real_verification_width():
    """min(D + 1, W) rows per decoder, within an even share of a ragged row budget."""
    assert following_rows(decode(2)) == 1
    assert following_rows(spec(2, 4)) == 4
    assert following_rows(spec(2, 4, p=5)) == 2
    assert following_rows(mixed(2, 64, 3)) == 3


@pytest.mark.parametrize(("snapshot_ms", "wins"), [(0.5, True), (4.0, False)])
def test_enabling_a_shared_speculative_batch_is_valued_at_its_width(snapshot_ms, wins):
    """The prerequisite pair values a speculative following graph at its real width:
    capturing B so that A and B verify four rows each together wins when the snapshot is
    cheap (at width one the pair would never beat A's own four-row round)."""
    snapshot = Descriptor(GraphKind.SNAPSHOT, 1, 0, 1, 1)
    costs = {prefill(64): 3.0, spec(1, 4): 2.0, spec(2, 4): 2.4, snapshot: snapshot_ms}
    s = scheduler(list(costs), costs)
    driver = Driver(s)
    likely = (0.9, 0.9, 0.9)
    a = s.admit(request(prompt=64, output=1000, acceptance_prior=likely))
    _run_until_decoder(driver, a)
    b = s.admit(request(prompt=64, output=1000, capture_ends=(64,), acceptance_prior=likely))
    while s.requests[b].pending_capture is None:
        driver.step(accepted=3)
    plan = s.plan()
    assert (plan.kind is GraphKind.SNAPSHOT) == wins
    if not wins:
        assert plan.descriptor == spec(1, 4) and plan.lanes[0].query_length == 4
