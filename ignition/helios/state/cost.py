"""Duration estimates per physical program, in ns; zero means unknown. Elapsed time alone
never makes a measured graph unknown."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum

from ignition.components.descriptor import Descriptor

CostKey = tuple
MEDIAN_WINDOW = 9


class Freshness(StrEnum):
    UNKNOWN = "unknown"
    FRESH = "fresh"
    STALE = "stale"


def median(values: list[int]) -> int:
    """Median, averaging the middle pair for an even count."""
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    if n % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) // 2


@dataclass
class CostEntry:
    estimate_ns: int = 0
    last_observation_ns: int = -1
    last_attempt_ns: int = -1
    samples: deque[int] = field(default_factory=lambda: deque(maxlen=MEDIAN_WINDOW))

    def freshness(self, now_ns: int, ttl_ns: int) -> Freshness:
        if self.estimate_ns <= 0:
            return Freshness.UNKNOWN
        if now_ns - self.last_observation_ns > ttl_ns:
            return Freshness.STALE
        return Freshness.FRESH

    def observe(self, sample_ns: int, now_ns: int, ttl_ns: int) -> bool:
        """Record a device sample; missing or zero samples change nothing."""
        if sample_ns <= 0:
            return False
        if self.freshness(now_ns, ttl_ns) is not Freshness.FRESH:
            self.samples.clear()
        self.samples.append(sample_ns)
        self.estimate_ns = median(list(self.samples))
        self.last_observation_ns = now_ns
        return True


class CostModel:
    """Estimates keyed by ``Descriptor.cost_key()``: active rows never change identity."""

    def __init__(self, ttl_ns: int) -> None:
        self.ttl_ns = ttl_ns
        self._entries: dict[CostKey, CostEntry] = {}
        self._by_object: dict[int, tuple[Descriptor, CostEntry]] = {}
        self.version = 0  # bumped by every observation (estimates and freshness)
        self.estimates_version = 0  # bumped only when an estimate's value changes
        self.derived: dict[str, tuple] = {}  # values computed from estimates, keyed by version

    def entry(self, d: Descriptor) -> CostEntry:
        cached = self._by_object.get(id(d))
        if cached is not None and cached[0] is d:
            return cached[1]
        key = d.cost_key()
        found = self._entries.get(key)
        if found is None:
            found = self._entries[key] = CostEntry()
        self._by_object[id(d)] = (d, found)
        return found

    def estimate_ns(self, d: Descriptor) -> int:
        return self.entry(d).estimate_ns

    def freshness(self, d: Descriptor, now_ns: int) -> Freshness:
        return self.entry(d).freshness(now_ns, self.ttl_ns)

    def observation_age_ns(self, d: Descriptor, now_ns: int) -> int:
        found = self.entry(d)
        if found.last_observation_ns < 0:
            return -1
        return max(0, now_ns - found.last_observation_ns)

    def observe(self, d: Descriptor, sample_ns: int, now_ns: int) -> bool:
        entry = self.entry(d)
        before = entry.estimate_ns
        changed = entry.observe(sample_ns, now_ns, self.ttl_ns)
        self.version += changed
        self.estimates_version += entry.estimate_ns != before
        return changed

    def note_attempt(self, d: Descriptor, now_ns: int) -> None:
        """Attempts advance only on committed execution (the refresh ordering uses them)."""
        self.entry(d).last_attempt_ns = now_ns

    def seed(self, d: Descriptor, duration_ns: int, now_ns: int = 0) -> None:
        """Preseed a measured cost (a measured synthetic catalog, a warm restart)."""
        if duration_ns <= 0:
            raise ValueError(f"{d.name}: a seeded duration must be positive, got {duration_ns}")
        self.observe(d, duration_ns, now_ns)
