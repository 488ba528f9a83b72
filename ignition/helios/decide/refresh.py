"""Funded timing refresh, and the credit ledgers both kinds of exploration draw on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ignition.helios.decide.utility import Candidate, Decision, compare
from ignition.helios.plans import ExecutionClass
from ignition.helios.reports import ExecutionTiming
from ignition.helios.state.cost import CostModel, Freshness

CREDIT_CAP_NS = 5_000_000


@dataclass
class CreditLedger:
    """One exploration budget: earns ``numerator / denominator`` of credited ordinary time."""

    numerator: int
    denominator: int
    cap_ns: int = CREDIT_CAP_NS
    balance: int = 0
    open_fence: int | None = None
    ordinary_ns: int = 0  # O: credited ordinary time that earned into this ledger
    spent_ns: int = 0  # P: what closed episodes paid
    episodes: int = 0
    last_episode_ns: int = 0  # D of the last closed episode

    @property
    def share(self) -> float:
        return self.numerator / self.denominator

    @property
    def balance_ns(self) -> float:
        return self.balance / self.denominator

    @property
    def is_open(self) -> bool:
        return self.open_fence is not None

    def has_full_credit(self) -> bool:
        return self.balance >= self.cap_ns * self.denominator

    def can_open(self) -> bool:
        """One episode at a time; the next needs full credit after the last one closes."""
        return not self.is_open and self.has_full_credit()

    def earn(self, credited_ns: int) -> None:
        if credited_ns <= 0:
            return
        self.ordinary_ns += credited_ns
        self.balance = min(
            self.cap_ns * self.denominator, self.balance + self.numerator * credited_ns
        )

    def open(self, fence: int) -> None:
        if not self.can_open():
            raise ValueError("an exploration episode needs full credit and no open episode")
        self.open_fence = fence

    def close(self, fence: int, paid_ns: int) -> None:
        """The episode pays its actual duration once; debt is allowed."""
        if self.open_fence != fence:
            raise ValueError(f"fence {fence} is not this ledger's open episode")
        paid_ns = max(0, paid_ns)
        self.open_fence = None
        self.balance -= self.denominator * paid_ns
        self.spent_ns += paid_ns
        self.episodes += 1
        self.last_episode_ns = paid_ns

    def idle(self) -> None:
        """Idle discards positive credit and preserves debt."""
        self.balance = min(self.balance, 0)


def timing_refresh_ledger() -> CreditLedger:
    return CreditLedger(numerator=2, denominator=998)


def acceptance_learning_ledger() -> CreditLedger:
    return CreditLedger(numerator=1, denominator=99)


class ExecutionBooks:
    """Both exploration ledgers and the per-class totals of completed executions."""

    def __init__(self) -> None:
        self.refresh = timing_refresh_ledger()
        self.learning = acceptance_learning_ledger()
        self._totals = {c: [0, 0] for c in ExecutionClass}  # executions, nanoseconds

    def ledger_of(self, cls: ExecutionClass) -> CreditLedger | None:
        if cls is ExecutionClass.TIMING_REFRESH:
            return self.refresh
        if cls is ExecutionClass.ACCEPTANCE_LEARNING:
            return self.learning
        return None

    def account(
        self, cls: ExecutionClass, fence: int, timing: ExecutionTiming, was_queued: bool
    ) -> int | None:
        """Charge one completion; returns what an exploration episode paid (else None)."""
        ledger = self.ledger_of(cls)
        spent = None
        if cls is ExecutionClass.ORDINARY:
            ns = credited_ns(timing, was_queued)
            self.refresh.earn(ns)
            self.learning.earn(ns)
        elif ledger is None:
            ns = credited_ns(timing, was_queued) or timing.wall_ns
        else:
            ns = spent = episode_ns(timing)
            ledger.close(fence, ns)
        totals = self._totals[cls]
        totals[0] += 1
        totals[1] += ns
        return spent

    def idle(self) -> None:
        self.refresh.idle()
        self.learning.idle()

    def totals(self) -> dict[str, dict[str, int]]:
        """Per class: ``executions``, ``nanoseconds`` (credited raw time for ordinary work,
        what episodes paid for exploration), closed ``episodes`` and ``last_episode_ns``
        (D of the bounds; 0 for ordinary and discovery)."""
        out: dict[str, dict[str, int]] = {}
        for cls in ExecutionClass:
            executions, ns = self._totals[cls]
            ledger = self.ledger_of(cls)
            out[cls.value] = {
                "executions": executions,
                "nanoseconds": ns,
                "episodes": 0 if ledger is None else ledger.episodes,
                "last_episode_ns": 0 if ledger is None else ledger.last_episode_ns,
            }
        return out


def credited_ns(timing: ExecutionTiming, was_queued: bool) -> int:
    """Credited raw time of a completion: the maximum positive device interval when
    queued, the larger of that and the wall interval when isolated; zero when invalid."""
    if timing.device_ns <= 0:
        return 0
    return timing.device_ns if was_queued else max(timing.device_ns, timing.wall_ns)


def episode_ns(timing: ExecutionTiming) -> int:
    """What an (always isolated) exploration episode pays: its raw physical interval,
    readiness stalls included; with an invalid device interval, its wall time."""
    return max(timing.device_ns, timing.wall_ns)


def refresh_key(c: Candidate, costs: CostModel) -> int:
    """The later of the last valid observation and the last attempted dispatch."""
    entry = costs.entry(c.descriptor)
    return max(entry.last_observation_ns, entry.last_attempt_ns)


def could_win(c: Candidate, winner: Candidate, costs: CostModel, decision: Decision) -> bool:
    """Whether a stale alternative could beat the ordinary ``winner`` if refreshed: its
    score scaled by its estimate over the fastest sample in the estimate's window (the
    estimate is their median) at least the winner's. A score is value per time net of
    terms that grow with the duration, so the scaled score is a low estimate of the score
    at the fastest duration (a rejected or losing score stays as it is). Always true
    without ``decision.refresh_could_win`` (the seed's rule: any stale alternative)."""
    if not decision.refresh_could_win:
        return True
    samples = costs.entry(c.descriptor).samples
    fastest_ns = max(1, min(min(samples, default=c.duration_ns), c.duration_ns))
    optimistic = c.score * c.duration_ns / fastest_ns if c.score > 0 else c.score
    return optimistic >= winner.score


def choose_refresh(
    winner: Candidate,
    candidates: Sequence[Candidate],
    costs: CostModel,
    decision: Decision | None = None,
) -> Candidate | None:
    """The stale alternative that full credit lets displace the ordinary measured winner
    (with ``decision``: only one that :func:`could_win`)."""
    if winner.is_indeterminate:
        return None  # initial discovery runs first and is accounted separately
    own = winner.descriptor.cost_key()
    best: Candidate | None = None
    best_key = 0
    for c in candidates:
        if c.freshness is not Freshness.STALE or c.descriptor.cost_key() == own:
            continue
        if decision is not None and not could_win(c, winner, costs, decision):
            continue
        key = refresh_key(c, costs)
        if best is None or key < best_key or (key == best_key and compare(c, best) < 0):
            best, best_key = c, key
    return best
