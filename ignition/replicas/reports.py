"""What a replica tells the router: one typed report per routing decision."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ReplicaReport:
    """One replica's room and cache for one request: ``cached_prefix_tokens`` is the longest
    retained proper prefix of the prompt (0 unprobed), the rest Helios's published usage."""

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
