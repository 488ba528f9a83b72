"""The global snapshot-row allocator: which row holds which retained checkpoint."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from ignition.runtime.retention.captures import CheckpointRole


class RowState(StrEnum):
    FREE = "free"
    ARMED = "armed"
    COPYING = "copying"
    RETAINED = "retained"


class SnapshotRowError(RuntimeError):
    """A row transition the allocator's state does not allow."""


def prefix_key(tokens: Sequence[int]) -> str:
    data = b"".join(int(t).to_bytes(8, "little", signed=True) for t in tokens)
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@dataclass
class Row:
    index: int
    state: RowState = RowState.FREE
    key: str = ""
    tokens: tuple[int, ...] = ()
    role: CheckpointRole = CheckpointRole.EARLIER_MESSAGE
    owner: object = None  # the request whose copy armed it
    demand_ns: int = 0  # creation or the last match, whichever is later
    hit_ns: int = 0  # the last admission that matched it
    readers: int = 0  # in-flight restores reading the row
    guard_owner: object = None
    cancelled: bool = False

    @property
    def length(self) -> int:
        return len(self.tokens)

    def victim_key(self, superseded: bool = False) -> tuple[int, int, int, int]:
        """Eviction order: a strict prefix of another retained row counts only its own matches."""
        demand = self.hit_ns if superseded else self.demand_ns
        return (demand, int(self.role), self.length, self.index)


@dataclass(frozen=True)
class Match:
    row: int
    num_tokens: int


@dataclass(frozen=True)
class Destination:
    """An armed copy target; ``aliased`` means the prefix is already held (no copy)."""

    row: int
    aliased: bool


class SnapshotRows:
    def __init__(self, num_rows: int) -> None:
        if num_rows < 0:
            raise ValueError(f"--snapshot-rows = {num_rows}: must be nonnegative")
        self.rows = [Row(i) for i in range(num_rows)]
        self._by_key: dict[str, int] = {}
        self.num_evictions = 0

    @property
    def num_rows(self) -> int:
        return len(self.rows)

    def count(self, state: RowState) -> int:
        return sum(1 for r in self.rows if r.state is state)

    def lookup(self, prompt: Sequence[int], now_ns: int) -> Match | None:
        """The longest retained checkpoint that is a proper prefix of ``prompt``."""
        best: Row | None = None
        for row in self.rows:
            if row.state is not RowState.RETAINED or not 0 < row.length < len(prompt):
                continue
            if best is not None and row.length <= best.length:
                continue
            if tuple(prompt[: row.length]) == row.tokens:
                best = row
        if best is None:
            return None
        best.demand_ns = best.hit_ns = now_ns
        return Match(best.index, best.length)

    def longest_retained(self, prompt: Sequence[int]) -> int:
        """The tokens of the longest retained proper prefix of ``prompt`` (0: none); not demand."""
        best = 0
        for row in list(self.rows):
            tokens, state = row.tokens, row.state
            if state is RowState.RETAINED and best < len(tokens) < len(prompt):
                if tuple(prompt[: len(tokens)]) == tokens:
                    best = len(tokens)
        return best

    def begin_read(self, row: int) -> None:
        r = self.rows[row]
        if r.state is not RowState.RETAINED:
            raise SnapshotRowError(f"snapshot row {row} is {r.state.value}, not retained")
        r.readers += 1

    def end_read(self, row: int) -> None:
        r = self.rows[row]
        if r.readers < 1:
            raise SnapshotRowError(f"snapshot row {row} has no restore in flight")
        r.readers -= 1

    def _victim(self, owner: object, optional: bool) -> Row | None:
        """The row to take: free, own guard, retained by recency and role, then another's guard."""
        free, own, retained, others = [], [], [], []
        for r in self.rows:
            if r.state is RowState.RETAINED and not r.readers:
                retained.append(r)
            elif r.state is RowState.FREE:
                if r.guard_owner is None:
                    free.append(r)
                elif not optional:
                    (own if r.guard_owner is owner else others).append(r)
        for group in (free, own):
            if group:
                return group[0]
        if retained:
            held = [r.tokens for r in self.rows if r.state is not RowState.FREE]

            def superseded(r: Row) -> bool:
                return any(len(t) > r.length and t[: r.length] == r.tokens for t in held)

            return min(retained, key=lambda r: r.victim_key(superseded(r)))
        return others[0] if others else None

    def holds(self, tokens: Sequence[int]) -> bool:
        """Whether a row already holds (or is copying) exactly this prefix."""
        return prefix_key(tokens) in self._by_key

    def can_obtain(self, tokens: Sequence[int], owner: object, optional: bool = True) -> bool:
        return prefix_key(tokens) in self._by_key or self._victim(owner, optional) is not None

    def arm(
        self,
        tokens: Sequence[int],
        role: CheckpointRole,
        owner: object,
        now_ns: int,
        *,
        optional: bool = True,
    ) -> Destination | None:
        """Obtain a destination for a copy of ``tokens``' checkpoint, or None."""
        key = prefix_key(tokens)
        if key in self._by_key:
            row = self.rows[self._by_key[key]]
            row.demand_ns = max(row.demand_ns, now_ns)
            row.role = max(row.role, role)
            return Destination(row.index, aliased=True)
        row = self._victim(owner, optional)
        if row is None:
            return None
        if row.state is RowState.RETAINED:
            del self._by_key[row.key]
            self.num_evictions += 1
        row.guard_owner = None  # armed: the guard (own, or revoked by mandatory work) is used
        row.state, row.key, row.tokens = RowState.ARMED, key, tuple(tokens)
        row.role, row.owner, row.demand_ns, row.cancelled = role, owner, now_ns, False
        self._by_key[key] = row.index
        if not optional:
            self.unguard(owner)  # the anchor has its destination: its guard is done
        return Destination(row.index, aliased=False)

    def guard(self, owner: object) -> int | None:
        """Protect one free row for ``owner``'s later anchor from optional captures."""
        for r in self.rows:
            if r.state is RowState.FREE and r.guard_owner is None:
                r.guard_owner = owner
                return r.index
        return None

    def unguard(self, owner: object) -> None:
        for r in self.rows:
            if r.guard_owner is owner:
                r.guard_owner = None

    def begin_copy(self, row: int) -> None:
        r = self.rows[row]
        if r.state is not RowState.ARMED:
            raise SnapshotRowError(f"snapshot row {row} is {r.state.value}, not armed")
        r.state = RowState.COPYING

    def skip(self, row: int) -> None:
        """An armed copy that will not run (its cost expired after the split)."""
        r = self.rows[row]
        if r.state is not RowState.ARMED:
            raise SnapshotRowError(f"snapshot row {row} is {r.state.value}, not armed")
        self._free(r)

    def complete_copy(self, row: int, ok: bool = True) -> bool:
        """The device finished the copy; returns whether the checkpoint was published."""
        r = self.rows[row]
        if r.state is not RowState.COPYING:
            raise SnapshotRowError(f"snapshot row {row} is {r.state.value}, not copying")
        if not ok or r.cancelled:
            self._free(r)
            return False
        r.state, r.owner = RowState.RETAINED, None
        return True

    def cancel_owner(self, owner: object) -> None:
        """``owner`` was cancelled: free what no copy in flight still needs."""
        for r in self.rows:
            if r.guard_owner is owner:
                r.guard_owner = None
            if r.owner is not owner:
                continue
            if r.state is RowState.ARMED:
                self._free(r)
            elif r.state is RowState.COPYING:
                r.cancelled = True

    def _free(self, r: Row) -> None:
        if r.key and self._by_key.get(r.key) == r.index:
            del self._by_key[r.key]
        r.__init__(r.index)  # type: ignore[misc]
