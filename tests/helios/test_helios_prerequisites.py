"""Prerequisite lookahead (design: "Prerequisites and completion").

The pair cohort is checked against exhaustive enumeration of every request subset for
random fixed shapes and lane values; the sentences about prefixes, ties, unknown
durations and the continuation index each get one test.
"""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ignition.helios.decide.prerequisites import (
    PairShape,
    PinnedRow,
    TerminalContribution,
    best_pair_cohort,
    chain_score,
    continuation_contribution,
    sequence_score,
)
from ignition.helios.decide.state_candidates import PairCase, _enabled_prompts
from ignition.helios.decide.terminal import saved_waiting
from ignition.helios.decide.utility import RELATIVE_TIE
from ignition.helios.types import SchedulerError


def _subsets(n: int, max_size: int):
    for size in range(min(n, max_size) + 1):
        yield from itertools.combinations(range(n), size)


def exhaustive(shape, enabled, ready, terminal, waiting, pinned=None):
    """Every subset triple that fits both capacities, scored the same way."""
    pin_enabled = pinned is not None and pinned.enabled
    bp = shape.prerequisite_rows - (1 if pin_enabled else 0)
    bf = shape.following_rows - (1 if pinned is not None else 0)
    best = None
    for e in _subsets(len(enabled), min(bp, bf)):
        if not e and not pin_enabled:
            continue  # at least one newly ready row participates
        for r in _subsets(len(ready), bf - len(e)):
            for t in _subsets(len(terminal), bp - len(e)):
                free = bp - len(e) - len(t)
                extra = min(free, len(enabled) - len(e))
                value = (
                    (pinned.value if pinned else 0.0)
                    + sum(enabled[i] for i in e)
                    + sum(ready[i] for i in r)
                    + sum(terminal[i].sequence for i in t)
                )
                prefix = sum(terminal[i].prefix for i in t)
                score = sequence_score(shape, value, prefix, bool(t), waiting)
                advanced = len(e) + len(r) + len(t) + extra + (1 if pinned else 0)
                if best is None or (score, advanced) > best:
                    best = (score, advanced)
    return best


values = st.floats(min_value=0.0, max_value=1000.0, allow_nan=False)
durations = st.one_of(st.none(), st.floats(min_value=0.01, max_value=50.0))


@st.composite
def terminals(draw):
    prefix = draw(values)
    saved = draw(st.floats(min_value=0.0, max_value=100.0))
    return TerminalContribution(prefix=prefix, sequence=prefix + saved)


@settings(max_examples=300, deadline=None)
@given(
    bp=st.integers(1, 4),
    bf=st.integers(1, 4),
    t_ms=durations,
    f_ms=durations,
    enabled=st.lists(values, max_size=4),
    ready=st.lists(values, max_size=4),
    terminal=st.lists(terminals(), max_size=3),
    waiting=st.floats(min_value=0.0, max_value=5.0),
    pin=st.sampled_from(["absent", "ready", "enabled"]),
    pin_value=values,
)
def test_pair_cohort_matches_exhaustive_enumeration(
    bp, bf, t_ms, f_ms, enabled, ready, terminal, waiting, pin, pin_value
):
    """Sorted prefix sums give the best choice over all k without enumerating subsets:
    the fixed-pair cohort calculation is exact."""
    shape = PairShape(bp, bf, t_ms, f_ms)
    pinned = None if pin == "absent" else PinnedRow(pin_value, pin == "enabled")
    fast = best_pair_cohort(shape, enabled, ready, terminal, waiting, pinned)
    slow = exhaustive(shape, enabled, ready, terminal, waiting, pinned)
    if slow is None:
        assert fast is None
        return
    assert fast is not None
    assert math.isclose(fast.score, slow[0], rel_tol=1e-9, abs_tol=1e-9)
    # The reported cohort really has that score and fits both shapes.
    value = (
        (pinned.value if pinned else 0.0)
        + sum(enabled[i] for i in fast.enabled)
        + sum(ready[i] for i in fast.ready)
        + sum(terminal[i].sequence for i in fast.terminal)
    )
    assert math.isclose(value, fast.sequence_value, rel_tol=1e-12, abs_tol=1e-9)
    pin_rows = 1 if pinned is not None and pinned.enabled else 0
    assert len(fast.prerequisite_rows) + len(fast.terminal) + pin_rows <= bp
    assert len(fast.enabled) + len(fast.ready) + (1 if pinned else 0) <= bf
    assert not set(fast.enabled) & set(fast.extra_enabled)


def test_at_least_one_newly_ready_row_participates():
    """Ready rows worth far more than the enabled one still leave it a following row."""
    shape = PairShape(1, 2, 1.0, 1.0)
    choice = best_pair_cohort(shape, [1.0], [500.0, 400.0], [], 0.0)
    assert choice is not None and choice.enabled == (0,) and choice.ready == (0,)


def test_pair_enables_nothing_without_a_newly_ready_row():
    assert best_pair_cohort(PairShape(2, 2, 1.0, 1.0), [], [5.0], [], 0.0) is None


def test_unused_prerequisite_capacity_advances_more_requests():
    """Unused prerequisite capacity can advance additional rows at no extra physical cost;
    equal value rates prefer advancing more requests."""
    shape = PairShape(4, 1, 1.0, 2.0)
    choice = best_pair_cohort(shape, [3.0, 0.0, 0.0, 0.0], [], [], 0.0)
    assert choice is not None
    assert choice.enabled == (0,)
    assert set(choice.extra_enabled) == {1, 2, 3}
    assert choice.num_advanced == 4


def test_the_productive_first_stage_prefix_is_compared_too():
    """A valuable terminal completion in the prerequisite is not diluted by a long F."""
    shape = PairShape(2, 1, 1.0, 1000.0)
    terminal = [TerminalContribution(prefix=100.0, sequence=100.0)]
    choice = best_pair_cohort(shape, [1.0], [], terminal, 0.0)
    assert choice is not None and choice.terminal == (0,)
    assert choice.score == pytest.approx(100.0 / 1.0)


def test_sequence_score_uses_total_duration_and_common_waiting():
    shape = PairShape(1, 1, 2.0, 3.0)
    assert sequence_score(shape, 50.0, 0.0, False, 0.4) == pytest.approx(50 / 5 - 5 / 2 * 0.4)


def test_unknown_durations_compare_optimistically_by_value():
    shape = PairShape(1, 2, None, 4.0)
    choice = best_pair_cohort(shape, [7.0], [5.0], [], 3.0)
    assert choice is not None and choice.score == pytest.approx(12.0)


def test_terminal_row_stops_ageing_at_the_snapshot_completion():
    """In a two-stage sequence a terminal row saves the waiting over the remaining F."""
    assert saved_waiting(2.0, stop_ms=1.0, total_ms=3.0) == pytest.approx(2.0 * (9 - 1) / 2)
    assert saved_waiting(2.0, stop_ms=3.0, total_ms=3.0) == 0.0


def test_continuation_index_for_longer_chains():
    """Its cohort-ranking contribution is V*T/(T+F); unknown durations rank by value."""
    assert continuation_contribution(90.0, 1.0, 2.0) == pytest.approx(30.0)
    assert continuation_contribution(90.0, None, 2.0) == 90.0
    assert chain_score([30.0, 10.0], 2.0, 0.5) == pytest.approx(40 / 2 - 2 / 2 * 0.5)


def test_negative_contributions_are_rejected():
    with pytest.raises(SchedulerError, match="enabled contribution"):
        best_pair_cohort(PairShape(1, 1, 1.0, 1.0), [-1.0], [], [], 0.0)


def _decode_alone(value: float, f_ms: float, waiting: float) -> float:
    return value / f_ms - f_ms / 2 * waiting


@pytest.mark.parametrize("restore_ms", [0.1, 0.5, 2.0, 8.0, 32.0])
def test_snapshot_cost_decides_whether_a_shared_decode_batch_wins(restore_ms):
    """Enabling a shared decode batch wins only when the complete sequence has
    sufficient value per time: a request waiting for restore joins a ready decoder's
    batch-two decode only if restore + shared decode beats the ready decoder alone."""
    ready_value, enabled_value, waiting = 100.0, 100.0, 0.2
    solo_ms, pair_ms = 2.0, 2.4
    pair = best_pair_cohort(
        PairShape(1, 2, restore_ms, pair_ms), [enabled_value], [ready_value], [], waiting
    )
    assert pair is not None
    solo = _decode_alone(ready_value, solo_ms, waiting)
    total = restore_ms + pair_ms
    sufficient = (ready_value + enabled_value) / total - total / 2 * waiting > solo
    assert (pair.score > solo) == sufficient
    assert sufficient == (restore_ms < 1.5)  # both sides of the boundary are exercised


@settings(max_examples=150, deadline=None)
@given(
    bp=st.integers(1, 3),
    bf=st.integers(1, 4),
    t_ms=durations,
    f_ms=durations,
    prompts=st.lists(values, min_size=1, max_size=4),
    decoders=st.lists(values, max_size=3),
    ready=st.lists(values, max_size=4),
    terminal=st.lists(terminals(), max_size=3),
    waiting=st.floats(min_value=0.0, max_value=5.0),
)
def test_enabled_prompt_rows_sharing_one_cohort_score_as_each_pinned_alone(
    bp, bf, t_ms, f_ms, prompts, decoders, ready, terminal, waiting
):
    """The mixed graph's enabled-prompt cases share one cohort (state_candidates): each
    row's choice, newly enabled decoders beside it included, equals best_pair_cohort
    with that row pinned alone."""
    shape = PairShape(bp, bf, t_ms, f_ms)
    views = [object() for _ in prompts]
    case = PairCase(
        decoders,
        ready,
        PinnedRow(0.0, enabled=True),
        [object() for _ in decoders],
        [],
        None,
        list(zip(prompts, views, strict=True)),
    )
    shared = _enabled_prompts(case, shape, terminal, waiting)
    alone = [
        best_pair_cohort(shape, decoders, ready, terminal, waiting, PinnedRow(p, enabled=True))
        for p in prompts
    ]
    assert [v for _, v in shared] == [v for v, c in zip(views, alone, strict=True) if c is not None]
    for (got, _), want in zip(shared, [c for c in alone if c is not None], strict=True):
        # the shared cohort adds the prompt last: equal up to the order of the sums, and
        # two cohorts whose scores differ by less than the selection's own tie tolerance
        # (RELATIVE_TIE) are a tie the sum order may break either way
        tie = 2 * RELATIVE_TIE
        assert got.score == pytest.approx(want.score, rel=tie, abs=tie)
        assert got.sequence_value == pytest.approx(want.sequence_value, rel=tie, abs=tie)
        assert got.terminal == want.terminal and got.ready == want.ready
        assert got.prerequisite_rows == want.prerequisite_rows
