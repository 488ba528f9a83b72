"""Which replica serves a request: a pure choice over typed reports (docs/scaling.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ignition.replicas.reports import ReplicaReport

DEFAULT_MAX_IMBALANCE = 4


class NoReplicaError(RuntimeError):
    """Every replica is down or did not answer (the router answers 503)."""


@dataclass(frozen=True)
class Choice:
    """The replica chosen and why: ``prefix`` (its cache), ``room`` or ``turn``."""

    replica: str
    reason: str


@dataclass(frozen=True)
class Routed:
    """The router's own view: requests it forwarded and has not seen end, and in all."""

    in_flight: Mapping[str, int]
    total: Mapping[str, int]


class RoutingPolicy(Protocol):
    def choose(self, reports: Sequence[ReplicaReport], routed: Routed) -> Choice: ...


def _healthy(reports: Sequence[ReplicaReport]) -> list[ReplicaReport]:
    healthy = [r for r in reports if r.is_healthy]
    if not healthy:
        raise NoReplicaError("no replica is serving: every replica is down or restarting")
    return healthy


def load(report: ReplicaReport, routed: Routed) -> int:
    """Queued work as Helios reports it, or the router's own count when larger."""
    return max(report.queued_work, routed.in_flight.get(report.replica, 0))


@dataclass(frozen=True)
class AffinityRouting:
    max_imbalance: int = DEFAULT_MAX_IMBALANCE

    def __post_init__(self) -> None:
        if self.max_imbalance < 0:
            raise ValueError(f"max_imbalance = {self.max_imbalance}: must be nonnegative")

    def choose(self, reports: Sequence[ReplicaReport], routed: Routed) -> Choice:
        healthy = _healthy(reports)

        def room(r: ReplicaReport) -> tuple:
            total = routed.total.get(r.replica, 0)
            return (not r.can_admit, load(r, routed), -r.num_free_pages, total, r.replica)

        roomiest = min(healthy, key=room)
        holder = max(healthy, key=lambda r: (r.cached_prefix_tokens, -room(r)[1]))
        if holder.cached_prefix_tokens > 0:
            excess = load(holder, routed) - load(roomiest, routed)
            if excess <= self.max_imbalance:
                return Choice(holder.replica, "prefix")
        return Choice(roomiest.replica, "room")


@dataclass
class RoundRobinRouting:
    """Each healthy replica in turn (by name), whatever it holds or carries."""

    max_imbalance: int = DEFAULT_MAX_IMBALANCE  # unused; the same constructor as affinity
    _next: int = 0

    def choose(self, reports: Sequence[ReplicaReport], routed: Routed) -> Choice:
        healthy = sorted(_healthy(reports), key=lambda r: r.replica)
        chosen = healthy[self._next % len(healthy)]
        self._next += 1
        return Choice(chosen.replica, "turn")


ROUTING_POLICIES: dict[str, type] = {"affinity": AffinityRouting, "round-robin": RoundRobinRouting}


def routing_policy(name: str, max_imbalance: int = DEFAULT_MAX_IMBALANCE) -> RoutingPolicy:
    """The policy registered as ``name`` (--routing), with its imbalance bound."""
    if name not in ROUTING_POLICIES:
        raise ValueError(f"--routing = {name!r}: expected one of {', '.join(ROUTING_POLICIES)}")
    return ROUTING_POLICIES[name](max_imbalance=max_imbalance)
