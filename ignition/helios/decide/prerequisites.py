"""Prerequisite lookahead: choosing a prerequisite's cohort by what it enables."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from ignition.helios.types import SchedulerError

RELATIVE_TIE = 1e-9


@dataclass(frozen=True)
class PairShape:
    """The fixed pair: capacities in rows, durations in ms (None: unknown)."""

    prerequisite_rows: int
    following_rows: int
    prerequisite_ms: float | None
    following_ms: float | None

    def __post_init__(self) -> None:
        if self.prerequisite_rows < 1 or self.following_rows < 1:
            raise SchedulerError(f"{self}: capacities must be at least one row")
        for name in ("prerequisite_ms", "following_ms"):
            x = getattr(self, name)
            if x is not None and not (math.isfinite(x) and x > 0):
                raise SchedulerError(f"PairShape.{name} = {x!r}: positive, finite or None")

    @property
    def is_known(self) -> bool:
        return self.prerequisite_ms is not None and self.following_ms is not None


@dataclass(frozen=True)
class TerminalContribution:
    """A terminal row's value in the first-stage prefix (ageing through T) and in the
    complete sequence (the prefix value plus the waiting it saves over F)."""

    prefix: float
    sequence: float


@dataclass(frozen=True)
class PinnedRow:
    """The mixed following graph's prompt row, decided per case: ``enabled`` when the
    prerequisite enables it (it then uses a prerequisite row and counts as newly
    ready), otherwise already ready."""

    value: float
    enabled: bool


@dataclass(frozen=True)
class PairChoice:
    """Indices into the caller's sequences; ``extra_enabled`` rows are advanced by
    otherwise unused prerequisite capacity and earn nothing in the lookahead."""

    enabled: tuple[int, ...]
    ready: tuple[int, ...]
    terminal: tuple[int, ...]
    extra_enabled: tuple[int, ...]
    sequence_value: float
    prefix_value: float
    score: float
    num_advanced: int

    @property
    def prerequisite_rows(self) -> tuple[int, ...]:
        """Enabled rows the prerequisite runs (served first, then extra)."""
        return self.enabled + self.extra_enabled


def _check(values: Sequence[float], what: str) -> None:
    for v in values:
        if not (math.isfinite(v) and v >= 0):
            raise SchedulerError(f"{what} contribution {v!r}: must be finite and nonnegative")


def _descending(values: Sequence[float]) -> list[int]:
    return sorted(range(len(values)), key=lambda i: (-values[i], i))


def _prefix_sums(values: Sequence[float], order: Sequence[int]) -> list[float]:
    return [0.0, *accumulate(values[i] for i in order)]


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= RELATIVE_TIE * max(1.0, abs(a), abs(b))


def sequence_score(
    shape: PairShape, sequence_value: float, prefix_value: float, has_prefix: bool, waiting: float
) -> float:
    """max(complete sequence rate over T + F, productive prefix rate over T)."""
    if not shape.is_known:
        return sequence_value
    t, f = shape.prerequisite_ms, shape.following_ms
    assert t is not None and f is not None
    total = t + f
    score = sequence_value / total - total / 2.0 * waiting
    if has_prefix:
        score = max(score, prefix_value / t - t / 2.0 * waiting)
    return score


def best_pair_cohort(
    shape: PairShape,
    enabled: Sequence[float],
    ready: Sequence[float],
    terminal: Sequence[TerminalContribution],
    waiting: float,
    pinned: PinnedRow | None = None,
) -> PairChoice | None:
    """The exact best joint cohort for one fixed prerequisite/following pair."""
    _check(enabled, "enabled")
    _check(ready, "ready")
    _check([t.sequence for t in terminal], "terminal")
    _check([t.prefix for t in terminal], "terminal prefix")
    if not (math.isfinite(waiting) and waiting >= 0):
        raise SchedulerError(f"waiting coefficient {waiting!r}: must be finite and nonnegative")
    pin_value = pinned.value if pinned is not None else 0.0
    prerequisite_rows = shape.prerequisite_rows - (
        1 if pinned is not None and pinned.enabled else 0
    )
    following_rows = shape.following_rows - (1 if pinned is not None else 0)
    if prerequisite_rows < 0 or following_rows < 0:
        return None
    e_order, r_order = _descending(enabled), _descending(ready)
    e_sum, r_sum = _prefix_sums(enabled, e_order), _prefix_sums(ready, r_order)
    orderings = []
    for key in ("sequence", "prefix"):
        order = sorted(range(len(terminal)), key=lambda i, k=key: (-getattr(terminal[i], k), i))
        seq = _prefix_sums([t.sequence for t in terminal], order)
        pre = _prefix_sums([t.prefix for t in terminal], order)
        orderings.append((order, seq, pre))
    k_min = 0 if pinned is not None and pinned.enabled else 1
    k_max = min(len(enabled), prerequisite_rows, following_rows)
    best: tuple[float, int, int, int, int, int, int] | None = None
    for k in range(k_min, k_max + 1):
        r = min(following_rows - k, len(ready))
        t = min(prerequisite_rows - k, len(terminal))
        extra = min(prerequisite_rows - k - t, len(enabled) - k)
        advanced = k + r + t + extra + (1 if pinned is not None else 0)
        for o, (_, seq, pre) in enumerate(orderings):
            value = pin_value + e_sum[k] + r_sum[r] + seq[t]
            score = sequence_score(shape, value, pre[t], t > 0, waiting)
            if (
                best is None
                or (not _close(score, best[0]) and score > best[0])
                or (_close(score, best[0]) and advanced > best[1])
            ):
                best = (score, advanced, k, r, t, extra, o)
    if best is None:
        return None
    score, advanced, k, r, t, extra, o = best
    t_order, t_seq, t_pre = orderings[o]
    return PairChoice(
        enabled=tuple(e_order[:k]),
        ready=tuple(r_order[:r]),
        terminal=tuple(t_order[:t]),
        extra_enabled=tuple(e_order[k : k + extra]),
        sequence_value=pin_value + e_sum[k] + r_sum[r] + t_seq[t],
        prefix_value=t_pre[t],
        score=score,
        num_advanced=advanced,
    )


def continuation_contribution(value: float, stage_ms: float | None, rest_ms: float | None) -> float:
    """Cohort-ranking contribution V * T / (T + F) of a row whose value V arrives F ms
    after this T-ms stage (remaining prerequisite stages included); unknown durations
    rank optimistically by value."""
    if stage_ms is None or rest_ms is None:
        return value
    if stage_ms <= 0 or rest_ms < 0:
        raise SchedulerError(f"continuation durations T={stage_ms!r}, F={rest_ms!r}")
    return value * stage_ms / (stage_ms + rest_ms)


def chain_score(contributions: Sequence[float], stage_ms: float | None, waiting: float) -> float:
    """Sum of continuation contributions over T, minus the common waiting cost over T."""
    total = sum(contributions)
    if stage_ms is None:
        return total
    return total / stage_ms - stage_ms / 2.0 * waiting
