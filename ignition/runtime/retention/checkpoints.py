"""The engine's prefix cache for hybrid state: retained complete-state checkpoints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ignition.runtime.retention.captures import (
    CaptureCosts,
    CheckpointAllowance,
    CheckpointRole,
    plan_captures,
    validate_fraction,
)
from ignition.runtime.retention.payoff import (
    NextMessages,
    capture_pays,
    latest_message,
    restore_pays,
)
from ignition.runtime.retention.snapshot_rows import Destination, SnapshotRows


@dataclass
class RequestCheckpoints:
    """One request's retention state."""

    prompt: tuple[int, ...]
    restore_row: int = -1
    restore_tokens: int = 0
    allowance: CheckpointAllowance | None = None
    roles: dict[int, CheckpointRole] = field(default_factory=dict)
    reading: bool = False  # a restore of restore_row is in flight
    terminal: Destination | None = None
    costs: CaptureCosts | None = None  # the estimates at admission (the pay-off rule's)
    next_message: int | None = None  # the predicted next message (payoff.py)
    max_output: int = 0  # the reply a capture planned at admission predicts


@dataclass(frozen=True)
class Admission:
    restore_tokens: int
    capture_ends: tuple[int, ...]
    terminal_snapshot: bool


@dataclass
class CacheCounters:
    queries: int = 0
    hits: int = 0
    restored_tokens: int = 0
    published: int = 0
    skipped_copies: int = 0
    # restores and captures left out because they would not pay (payoff.py)
    unprofitable_restores: int = 0
    unprofitable_captures: int = 0


class CheckpointCache:
    """``payoff``: restores and captures must save more prefill than they cost."""

    def __init__(
        self, num_rows: int, extra_work_fraction: float = 0.05, payoff: bool = True
    ) -> None:
        validate_fraction(extra_work_fraction)
        self.rows = SnapshotRows(num_rows)
        self.fraction = extra_work_fraction
        self.payoff = payoff
        self.next_messages = NextMessages()
        self.requests: dict[object, RequestCheckpoints] = {}
        self.counters = CacheCounters()

    @property
    def is_enabled(self) -> bool:
        return self.rows.num_rows > 0

    @property
    def num_evictions(self) -> int:
        return self.rows.num_evictions

    def admit(
        self,
        owner: object,
        prompt: Sequence[int],
        message_ends: Sequence[int],
        costs: CaptureCosts,
        now_ns: int,
        restore: bool = True,
        mandatory: bool = False,
        max_output: int = 0,
    ) -> Admission:
        """Match ``prompt`` against the retained checkpoints and plan its captures."""
        prompt = tuple(prompt)
        state = RequestCheckpoints(prompt, costs=costs, max_output=max_output)
        self.requests[owner] = state
        if not self.is_enabled:
            return Admission(0, (), False)
        self.counters.queries += 1
        match = self.rows.lookup(prompt, now_ns) if restore else None
        checked = match is not None and self.payoff and not mandatory
        if checked and not restore_pays(
            costs.prefill, len(prompt), match.num_tokens, costs.restore_ns, self.fraction
        ):
            self.counters.unprofitable_restores += 1
            match = None
        if match is not None:
            state.restore_row, state.restore_tokens = match.row, match.num_tokens
            self.rows.begin_read(match.row)  # pinned until its restore completes
            state.reading = True
            self.counters.hits += 1
            self.counters.restored_tokens += match.num_tokens
        allowance = plan_captures(
            message_ends, len(prompt), state.restore_tokens, costs, self.fraction
        )
        state.allowance = allowance
        if self.payoff:
            latest = latest_message(message_ends, len(prompt))
            if latest is not None and not latest.is_only:
                self.next_messages.observe(latest.tokens)
                state.next_message = latest.tokens
            elif latest is not None:
                state.next_message = self.next_messages.predict()
        anchor = next((p for p in allowance.points if not p.is_extra), None)
        if anchor is not None and self._capture_pays(state, anchor.end, len(prompt)):
            self.rows.guard(owner)  # keeps a free row for the anchor from optional captures
        ends = []
        for point in allowance.points:
            if not self._capture_pays(state, point.end, len(prompt)):
                self.counters.unprofitable_captures += 1
                continue
            if not self.rows.can_obtain(prompt[: point.end], owner, optional=point.is_extra):
                continue  # no obtainable destination: no cut there
            if self.rows.holds(prompt[: point.end]):
                continue  # already retained (or being copied): nothing to capture
            state.roles[point.end] = point.role
            ends.append(point.end)
        return Admission(state.restore_tokens, tuple(sorted(ends)), True)

    def _capture_pays(self, state: RequestCheckpoints, tokens: int, covered: int) -> bool:
        """Whether a capture of ``tokens`` tokens pays for its copy (retention/payoff.py)."""
        if not self.payoff or state.costs is None or state.next_message is None:
            return True
        costs = state.costs
        reply_rest = 1 if covered > len(state.prompt) else state.max_output
        return capture_pays(
            costs.prefill,
            tokens,
            covered + reply_rest + state.next_message,
            costs.snapshot_ns,
            costs.restore_ns,
            self.fraction,
        )

    def restore_row(self, owner: object) -> int:
        state = self.requests[owner]
        if state.restore_row < 0:
            raise KeyError(f"{owner} has no checkpoint to restore")
        return state.restore_row

    def restore_done(self, owner: object) -> None:
        state = self.requests.get(owner)
        if state is not None and state.reading:
            self.rows.end_read(state.restore_row)
            state.reading = False

    def capture_row(self, owner: object, end: int, cost_is_fresh: bool, now_ns: int) -> int | None:
        """Arm and submit the destination of the capture at ``end``; None skips the copy."""
        state = self.requests[owner]
        role = state.roles.pop(end, None)
        if role is None:
            return None
        if role is not CheckpointRole.ANCHOR and not cost_is_fresh:
            self.counters.skipped_copies += 1
            return None
        optional = role is not CheckpointRole.ANCHOR
        dest = self.rows.arm(state.prompt[:end], role, owner, now_ns, optional=optional)
        if dest is None or dest.aliased:
            self.counters.skipped_copies += dest is None
            return None
        self.rows.begin_copy(dest.row)
        return dest.row

    def copy_done(self, row: int, ok: bool) -> None:
        if self.rows.complete_copy(row, ok):
            self.counters.published += 1

    def earn_decode(self, owner: object, measured_ns: int) -> None:
        state = self.requests.get(owner)
        if state is not None and state.allowance is not None:
            state.allowance.earn_decode(measured_ns)

    def arm_terminal(
        self, owner: object, tokens: Sequence[int], snapshot_ns: float | None, now_ns: int
    ) -> bool:
        """Fund and place the distinct terminal capture; False: retire without one."""
        state = self.requests.get(owner)
        if state is None or state.allowance is None or len(tokens) <= len(state.prompt):
            return False
        if not self._capture_pays(state, len(tokens), len(tokens)):
            self.counters.unprofitable_captures += 1
            return False
        if not self.rows.can_obtain(tokens, owner):
            return False
        if not state.allowance.try_terminal(snapshot_ns):
            return False
        dest = self.rows.arm(tokens, CheckpointRole.TERMINAL, owner, now_ns)
        if dest is None:
            return False
        state.terminal = dest
        return True

    def arm_preemption(self, owner: object, tokens: Sequence[int], now_ns: int) -> bool:
        """Place a preempted request's state for its resume; False: it recomputes."""
        state = self.requests.get(owner)
        if state is None or not self.is_enabled or state.terminal is not None:
            return False
        dest = self.rows.arm(tokens, CheckpointRole.TERMINAL, owner, now_ns, optional=False)
        if dest is None:
            return False
        state.terminal = dest
        return True

    def terminal_row(self, owner: object) -> int | None:
        state = self.requests.get(owner)
        dest = None if state is None else state.terminal
        if dest is None or dest.aliased:
            return None
        state.terminal = None  # type: ignore[union-attr]
        self.rows.begin_copy(dest.row)
        return dest.row

    def release(self, owner: object) -> None:
        """The request is over: free what no copy in flight still needs."""
        state = self.requests.pop(owner, None)
        if state is None:
            return
        if state.reading:
            self.rows.end_read(state.restore_row)
        self.rows.cancel_owner(owner)

    def cancel(self, owner: object) -> None:
        """Cancellation while work may be in flight: suppress publication of its copies."""
        self.rows.cancel_owner(owner)
