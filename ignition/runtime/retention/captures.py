"""Checkpoint retention: which prompt endpoints to capture, and what that may cost."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from ignition.runtime.retention.payoff import PrefillEstimate

DEFAULT_EXTRA_WORK_FRACTION = 0.05
# Default snapshot rows per request slot (docs/runtime.md).
ROWS_PER_SLOT = 4


class CheckpointRole(IntEnum):
    """Why a checkpoint exists; a lower rank is the likelier eviction victim."""

    EARLIER_MESSAGE = 0
    PROMPT_END = 1
    TERMINAL = 2
    ANCHOR = 3


@dataclass(frozen=True)
class CapturePoint:
    end: int  # prompt tokens the checkpoint covers
    role: CheckpointRole
    is_extra: bool


def conversation_anchors(message_ends: Sequence[int], prompt_len: int) -> list[CapturePoint]:
    """Capture candidates in preference order."""
    eligible = sorted({e for e in message_ends if 0 < e < prompt_len}, reverse=True)
    if not eligible:
        return [CapturePoint(prompt_len, CheckpointRole.ANCHOR, is_extra=False)]
    points = [CapturePoint(eligible[0], CheckpointRole.ANCHOR, is_extra=False)]
    points += [CapturePoint(e, CheckpointRole.EARLIER_MESSAGE, True) for e in eligible[1:]]
    points.append(CapturePoint(prompt_len, CheckpointRole.PROMPT_END, is_extra=True))
    return points


@dataclass(frozen=True)
class CaptureCosts:
    """Estimated costs in ns; None means unknown (no measurement yet)."""

    prefill_ns_per_token: float | None
    split_ns: float | None  # the extra launch a prefill cut adds
    snapshot_ns: float | None
    # What the pay-off rule (payoff.py) reads; None: unknown, work is kept.
    prefill: PrefillEstimate | None = None
    restore_ns: float | None = None

    @property
    def is_known(self) -> bool:
        return None not in (self.prefill_ns_per_token, self.split_ns, self.snapshot_ns)


@dataclass
class CheckpointAllowance:
    """One request's extra-work ledger, in ns of estimated device time."""

    fraction: float
    budget_ns: float = 0.0
    spent_ns: float = 0.0
    decode_earned_ns: float = 0.0
    terminal_captured: bool = False
    extras_enabled: bool = True
    points: list[CapturePoint] = field(default_factory=list)

    def __post_init__(self) -> None:
        validate_fraction(self.fraction)

    @property
    def remaining_ns(self) -> float:
        return self.budget_ns - self.spent_ns

    def try_spend(self, cost_ns: float | None) -> bool:
        """Charge an extra if it fits; unknown costs never fit."""
        if not self.extras_enabled or cost_ns is None or cost_ns > self.remaining_ns:
            return False
        self.spent_ns += cost_ns
        return True

    def earn_decode(self, measured_ns: int) -> None:
        """Productive completed decode earns ``fraction`` of its measured time."""
        if measured_ns > 0:
            self.decode_earned_ns += self.fraction * measured_ns

    def try_terminal(self, snapshot_ns: float | None) -> bool:
        """One distinct terminal capture, paid from decode earnings alone."""
        if self.terminal_captured or snapshot_ns is None or snapshot_ns > self.decode_earned_ns:
            return False
        self.decode_earned_ns -= snapshot_ns
        self.terminal_captured = True
        return True


def default_snapshot_rows(num_slots: int) -> int:
    return ROWS_PER_SLOT * max(1, num_slots)


def validate_fraction(fraction: float) -> None:
    if isinstance(fraction, bool) or not math.isfinite(fraction) or fraction < 0:
        raise ValueError(
            f"scheduler_checkpoint_extra_work_fraction = {fraction!r}: must be finite and "
            "nonnegative"
        )


def plan_captures(
    message_ends: Sequence[int],
    prompt_len: int,
    cached_tokens: int,
    costs: CaptureCosts,
    fraction: float = DEFAULT_EXTRA_WORK_FRACTION,
) -> CheckpointAllowance:
    """The request's capture points and the allowance left after paying for them."""
    allowance = CheckpointAllowance(fraction)
    if costs.is_known:
        assert costs.prefill_ns_per_token is not None
        allowance.budget_ns = fraction * costs.prefill_ns_per_token * (prompt_len - cached_tokens)
    else:
        allowance.extras_enabled = False
    points = [p for p in conversation_anchors(message_ends, prompt_len) if p.end > cached_tokens]
    anchor = next((p for p in points if not p.is_extra), None)
    if anchor is not None and anchor.end < prompt_len and costs.is_known:
        cut = (costs.split_ns or 0.0) + (costs.snapshot_ns or 0.0)
        if cut > allowance.remaining_ns:
            substitute = CapturePoint(prompt_len, CheckpointRole.ANCHOR, is_extra=False)
            points = [substitute, *(p for p in points if p.end < prompt_len and p is not anchor)]
    for point in points:
        if not point.is_extra:
            allowance.points.append(point)
            if costs.is_known:
                allowance.spent_ns += costs.snapshot_ns or 0.0  # the anchor copy is never refused
                if point.end < prompt_len:
                    allowance.spent_ns += costs.split_ns or 0.0
            continue
        cut = 0.0 if point.end == prompt_len else (costs.split_ns or 0.0)
        if allowance.try_spend(None if not costs.is_known else cut + (costs.snapshot_ns or 0.0)):
            allowance.points.append(point)
    allowance.points.sort(key=lambda p: p.end)
    return allowance
