"""The alias-aware global snapshot-row allocator (design: checkpoint retention)."""

from __future__ import annotations

import pytest

from ignition.runtime.retention.captures import CheckpointRole
from ignition.runtime.retention.snapshot_rows import RowState, SnapshotRowError, SnapshotRows


def _publish(rows: SnapshotRows, tokens, role, owner, now):
    dest = rows.arm(tokens, role, owner, now)
    assert dest is not None and not dest.aliased
    rows.begin_copy(dest.row)
    assert rows.complete_copy(dest.row)
    return dest.row


def _no_leak(rows: SnapshotRows) -> None:
    assert rows.count(RowState.ARMED) == rows.count(RowState.COPYING) == 0


def test_a_new_request_matches_the_longest_retained_proper_prefix():
    rows = SnapshotRows(3)
    _publish(rows, (1, 2), CheckpointRole.ANCHOR, "a", 1)
    long_row = _publish(rows, (1, 2, 3, 4), CheckpointRole.PROMPT_END, "a", 2)
    match = rows.lookup((1, 2, 3, 4, 5, 6), now_ns=3)
    assert match is not None and (match.row, match.num_tokens) == (long_row, 4)
    assert rows.lookup((1, 2, 3, 4), now_ns=3).num_tokens == 2  # a proper prefix only
    assert rows.lookup((9, 2, 3, 4, 5), now_ns=3) is None


def test_a_prefix_already_held_aliases_its_row():
    rows = SnapshotRows(2)
    row = _publish(rows, (1, 2, 3), CheckpointRole.ANCHOR, "a", 1)
    dest = rows.arm((1, 2, 3), CheckpointRole.ANCHOR, "b", 5)
    assert dest is not None and dest.aliased and dest.row == row
    assert rows.count(RowState.FREE) == 1


def test_victims_compare_demand_recency_then_role_then_length():
    rows = SnapshotRows(3)
    old = _publish(rows, (1,), CheckpointRole.ANCHOR, "a", 1)
    _publish(rows, (2,), CheckpointRole.EARLIER_MESSAGE, "a", 5)
    _publish(rows, (3, 3), CheckpointRole.ANCHOR, "a", 5)
    dest = rows.arm((4,), CheckpointRole.ANCHOR, "b", 9)
    assert dest.row == old and rows.num_evictions == 1  # least recently demanded
    rows.begin_copy(dest.row)
    rows.complete_copy(dest.row)
    rows.lookup((2, 9), now_ns=6)  # demand refreshes recency of (2,) to 6
    # (3, 3) demanded at 5 goes before (2,) demanded at 6, whatever its role.
    victim = rows.arm((5,), CheckpointRole.ANCHOR, "c", 10)
    assert rows.rows[victim.row].tokens == (5,)
    assert rows.lookup((3, 3, 1), now_ns=11) is None
    assert rows.lookup((2, 1), now_ns=11) is not None


def test_equal_recency_prefers_evicting_the_lower_role_then_the_shorter_endpoint():
    rows = SnapshotRows(3)
    _publish(rows, (1, 1, 1), CheckpointRole.ANCHOR, "a", 1)
    _publish(rows, (2, 2, 2), CheckpointRole.EARLIER_MESSAGE, "a", 1)
    _publish(rows, (3,), CheckpointRole.EARLIER_MESSAGE, "a", 1)
    dest = rows.arm((4,), CheckpointRole.ANCHOR, "b", 2)
    assert rows.rows[dest.row].tokens == (4,)
    assert rows.lookup((3, 0), 3) is None  # the shorter earlier-message checkpoint went
    assert rows.lookup((2, 2, 2, 0), 3) is not None


def test_rows_in_a_restore_are_never_victims():
    rows = SnapshotRows(1)
    row = _publish(rows, (1, 2), CheckpointRole.ANCHOR, "a", 1)
    rows.begin_read(row)
    assert rows.arm((7,), CheckpointRole.ANCHOR, "b", 2) is None
    rows.end_read(row)
    assert rows.arm((7,), CheckpointRole.ANCHOR, "b", 3) is not None


def test_armed_and_in_flight_rows_are_never_victims():
    rows = SnapshotRows(2)
    a = rows.arm((1,), CheckpointRole.ANCHOR, "a", 1)
    b = rows.arm((2,), CheckpointRole.ANCHOR, "b", 1)
    rows.begin_copy(b.row)
    assert rows.arm((3,), CheckpointRole.ANCHOR, "c", 2) is None
    assert not rows.can_obtain((3,), "c")
    assert a.row != b.row


def test_a_guard_protects_the_later_anchor_from_earlier_optional_captures():
    rows = SnapshotRows(1)
    rows.guard("a")
    assert rows.arm((1,), CheckpointRole.EARLIER_MESSAGE, "a", 1, optional=True) is None
    dest = rows.arm((1, 2), CheckpointRole.ANCHOR, "a", 2, optional=False)
    assert dest is not None


def test_mandatory_work_may_revoke_an_unused_guard():
    rows = SnapshotRows(1)
    rows.guard("a")
    assert rows.arm((9,), CheckpointRole.ANCHOR, "b", 1, optional=True) is None
    dest = rows.arm((9,), CheckpointRole.ANCHOR, "b", 1, optional=False)
    assert dest is not None and rows.rows[dest.row].guard_owner is None


def test_cancellation_mid_copy_keeps_the_row_until_completion_then_frees_it():
    """Retention survives cancellation mid-copy without leaking rows."""
    rows = SnapshotRows(2)
    kept = _publish(rows, (5, 5), CheckpointRole.ANCHOR, "old", 1)
    dest = rows.arm((1, 2, 3), CheckpointRole.ANCHOR, "a", 2)
    rows.begin_copy(dest.row)
    armed = rows.arm((1, 2, 3, 4), CheckpointRole.PROMPT_END, "a", 2)
    assert armed is not None and armed.row == kept  # evicts the only retained row
    rows.cancel_owner("a")
    # The unsubmitted destination is free at once; the in-flight copy still owns its row.
    assert rows.rows[armed.row].state is RowState.FREE
    assert rows.rows[dest.row].state is RowState.COPYING
    assert rows.arm((8,), CheckpointRole.ANCHOR, "b", 3).row == armed.row
    assert rows.arm((9,), CheckpointRole.ANCHOR, "c", 3) is None  # nothing else obtainable
    assert not rows.complete_copy(dest.row)  # cancellation suppresses publication
    assert rows.rows[dest.row].state is RowState.FREE
    assert rows.lookup((1, 2, 3, 4, 5), 4) is None
    rows.cancel_owner("b")
    _no_leak(rows)
    assert rows.count(RowState.FREE) == 2


def test_a_failed_copy_frees_its_row():
    rows = SnapshotRows(1)
    dest = rows.arm((1,), CheckpointRole.ANCHOR, "a", 1)
    rows.begin_copy(dest.row)
    assert not rows.complete_copy(dest.row, ok=False)
    _no_leak(rows)


def test_a_copy_skipped_after_its_split_frees_the_destination():
    """If its cost expires after dispatch, the copy can be skipped after the split."""
    rows = SnapshotRows(1)
    dest = rows.arm((1,), CheckpointRole.EARLIER_MESSAGE, "a", 1)
    rows.skip(dest.row)
    _no_leak(rows)
    with pytest.raises(SnapshotRowError, match="not armed"):
        rows.skip(dest.row)


def test_a_superseded_prefix_goes_before_another_conversations_latest_checkpoint():
    rows = SnapshotRows(3)
    other = _publish(rows, (9, 9, 9), CheckpointRole.TERMINAL, "b", 1)
    anchor = _publish(rows, (1, 2), CheckpointRole.ANCHOR, "a", 5)
    _publish(rows, (1, 2, 3, 4), CheckpointRole.TERMINAL, "a", 6)
    dest = rows.arm((7,), CheckpointRole.ANCHOR, "c", 7)
    assert dest.row == anchor  # created later, but superseded by (1, 2, 3, 4)
    assert rows.rows[other].state is RowState.RETAINED


def test_longest_retained_answers_a_router_without_counting_as_demand():
    """ignition/replicas/ asks where a conversation's cache lives; asking must not keep a
    checkpoint alive (demand recency orders eviction)."""
    rows = SnapshotRows(3)
    _publish(rows, (1, 2), CheckpointRole.ANCHOR, "a", 1)
    long_row = _publish(rows, (1, 2, 3, 4), CheckpointRole.PROMPT_END, "a", 2)
    assert rows.longest_retained((1, 2, 3, 4, 5)) == 4
    assert rows.longest_retained((1, 2, 3, 4)) == 2  # a proper prefix only
    assert rows.longest_retained((9, 2, 3)) == 0
    assert rows.rows[long_row].demand_ns == 2 and rows.rows[long_row].hit_ns == 0
