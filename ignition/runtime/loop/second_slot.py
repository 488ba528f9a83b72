"""The just-in-time second frame slot (RuntimeOptions.queue_lead_ms; docs/scheduling.md,
"Just-in-time second frame slot"): with one frame in flight, the engine plans the next
only a lead before that frame is expected to end, so a request that arrives meanwhile is
planned ahead of a frame that would otherwise already be queued."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

POLL_NS = 250_000  # how often the hold looks at the frame's end while no request arrives
DEFAULT_QUEUE_LEAD_MS = 5.0  # RuntimeOptions.queue_lead_ms (docs/scheduling.md: the lead sweep)


def lead_ns_from_ms(lead_ms: float | None) -> int | None:
    """RuntimeOptions.queue_lead_ms in ns (None stays None: the slot is filled at once)."""
    if lead_ms is None:
        return None
    if isinstance(lead_ms, bool) or not isinstance(lead_ms, (int, float)):
        raise ValueError(f"RuntimeOptions.queue_lead_ms = {lead_ms!r}: expected milliseconds")
    if not math.isfinite(lead_ms) or lead_ms < 0:
        raise ValueError(
            f"RuntimeOptions.queue_lead_ms = {lead_ms!r}: must be finite and nonnegative"
        )
    return round(lead_ms * 1e6)


class Release(Enum):
    """Why a hold ended: the planned time came, the frame ended, or a request arrived."""

    DUE = "due"
    DONE = "done"
    ARRIVAL = "arrival"


@dataclass(frozen=True)
class SecondSlot:
    lead_ns: int
    clock_ns: Callable[[], int]
    poll_ns: int = POLL_NS

    def __post_init__(self) -> None:
        if self.lead_ns < 0:
            raise ValueError(f"queue lead = {self.lead_ns} ns: must be nonnegative")

    def hold(
        self,
        expected_end_ns: int,
        is_done: Callable[[], bool],
        wait_for_arrival: Callable[[float], bool],
    ) -> Release:
        """Waits until ``expected_end_ns`` less the lead, the frame's end (``is_done``) or
        an arrival (``wait_for_arrival(timeout_s)`` True), whichever comes first."""
        due_ns = expected_end_ns - self.lead_ns
        while True:
            if is_done():
                return Release.DONE
            left_ns = due_ns - self.clock_ns()
            if left_ns <= 0:
                return Release.DUE
            if wait_for_arrival(min(left_ns, self.poll_ns) / 1e9):
                return Release.ARRIVAL
