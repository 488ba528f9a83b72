"""What a replica tells the router: one typed report per routing decision."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ReplicaReport:
    """One replica's room and cache for one request, read from its engine (never from text).

    ``cached_prefix_tokens``: the longest retained checkpoint or terminal snapshot that is a
    proper prefix of the request's prompt (0 when the request was not probed). The rest is
    Helios's usage as the engine publishes it each step: request slots (``can_admit`` is a
    free one), KV pages held by requests, and the queued work (running and waiting).
    """

    replica: str
    is_healthy: bool
    cached_prefix_tokens: int
    num_running: int
    num_waiting: int
    slots_used: int
    num_slots: int
    pages_used: int
    num_pages: int

    @property
    def can_admit(self) -> bool:
        return self.slots_used < self.num_slots

    @property
    def queued_work(self) -> int:
        """Requests this replica has accepted and not finished."""
        return self.num_running + self.num_waiting

    @property
    def num_free_pages(self) -> int:
        return max(0, self.num_pages - self.pages_used)

    def to_json(self) -> dict:
        return {**asdict(self), "can_admit": self.can_admit, "queued_work": self.queued_work}
