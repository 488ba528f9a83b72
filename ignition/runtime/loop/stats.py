"""Engine counters as plain numbers, read by /metrics and the test reports."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

from ignition.helios import HEAD_DRAFTS

# Upper bounds of the request phase histograms (queue, prefill, decode), in seconds.
PHASE_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
PHASES = ("queue", "prefill", "decode")
# The proposal source of a speculative lane (runtime/proposals), counted by its name: the
# MTP head's learned drafts, a copy of the request's context, its grammar's forced drafts
# or a registered one. Only the head's rows are learned-proposal draws; the others are
# supplied prefixes.
LEARNED_SOURCE = HEAD_DRAFTS.name


@dataclass(frozen=True)
class SourceCounts:
    """One proposal source's speculative lanes: rounds, drafts offered and accepted."""

    rounds: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0


@dataclass(frozen=True)
class PhaseHistogram:
    """Per-bucket counts (not cumulative) over PHASE_BUCKETS_S plus +Inf, sum and count."""

    counts: tuple[int, ...] = (0,) * (len(PHASE_BUCKETS_S) + 1)
    total_s: float = 0.0

    @property
    def count(self) -> int:
        return sum(self.counts)

    def add(self, seconds: float) -> PhaseHistogram:
        index = next((i for i, b in enumerate(PHASE_BUCKETS_S) if seconds <= b), -1)
        counts = list(self.counts)
        counts[index] += 1
        return PhaseHistogram(tuple(counts), self.total_s + seconds)


@dataclass(frozen=True)
class StatsSnapshot:
    executions_by_kind: dict[str, int] = field(default_factory=dict)
    execution_ns_by_kind: dict[str, int] = field(default_factory=dict)
    # (graph kind, execution class) -> count / nanoseconds
    executions_by_kind_class: dict[tuple[str, str], int] = field(default_factory=dict)
    execution_ns_by_kind_class: dict[tuple[str, str], int] = field(default_factory=dict)
    speculative_rounds: int = 0
    speculative_draft_tokens: int = 0
    speculative_accepted_tokens: int = 0
    accepted_by_position: dict[int, int] = field(default_factory=dict)
    # the same by proposal source (the totals above sum them), and (source, position)
    speculative_by_source: dict[str, SourceCounts] = field(default_factory=dict)
    accepted_by_source_position: dict[tuple[str, int], int] = field(default_factory=dict)
    finished_by_reason: dict[str, int] = field(default_factory=dict)
    prompt_tokens: int = 0
    output_tokens: int = 0
    running: int = 0
    waiting: int = 0
    preempted: int = 0  # preempted requests not yet resumed
    preemptions: int = 0
    prefix_cache_queries: int = 0
    prefix_cache_hits: int = 0
    prefix_cache_restored_tokens: int = 0
    prefix_cache_evictions: int = 0
    # restores and captures the pay-off rule left out (runtime/retention/payoff.py)
    prefix_cache_unprofitable_restores: int = 0
    prefix_cache_unprofitable_captures: int = 0
    slots_used: int = 0
    num_slots: int = 0
    pages_used: int = 0
    num_pages: int = 0
    phases: dict[str, PhaseHistogram] = field(default_factory=dict)


class EngineStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._executions: Counter[tuple[str, str]] = Counter()
        self._execution_ns: Counter[tuple[str, str]] = Counter()
        self._accepted_by_position: Counter[tuple[str, int]] = Counter()
        self._finished: Counter[str] = Counter()
        self._by_source: dict[str, SourceCounts] = {}
        self._prompt_tokens = 0
        self._output_tokens = 0
        self._running = 0
        self._waiting = 0
        self._preempted = 0
        self._preemptions = 0
        self._cache = [0, 0, 0, 0]  # queries, hits, restored tokens, evictions
        self._unprofitable = (0, 0)  # restores, captures (runtime/retention/payoff.py)
        self._slots = (0, 0)
        self._pages = (0, 0)
        self._phases = {phase: PhaseHistogram() for phase in PHASES}
        # The PLE n-gram table's counters (runtime.ple.stats.PleStats), set by serving.
        self.ple = None

    def record_execution(
        self, kind: str, interval_ns: int, execution_class: str = "ordinary"
    ) -> None:
        """One completed graph of ``kind`` and execution class."""
        with self._lock:
            self._executions[(kind, execution_class)] += 1
            self._execution_ns[(kind, execution_class)] += max(0, int(interval_ns))

    def record_speculation(
        self, num_offered: int, num_accepted: int, source: str = LEARNED_SOURCE
    ) -> None:
        """One lane of one speculative round, by the lane's proposal source."""
        with self._lock:
            if num_offered <= 0:
                return
            c = self._by_source.get(source, SourceCounts())
            self._by_source[source] = SourceCounts(
                c.rounds + 1, c.draft_tokens + num_offered, c.accepted_tokens + num_accepted
            )
            for position in range(1, num_accepted + 1):
                self._accepted_by_position[(source, position)] += 1

    def record_tokens(self, num_prompt: int, num_output: int) -> None:
        with self._lock:
            self._prompt_tokens += num_prompt
            self._output_tokens += num_output

    def record_finished(self, reason: str) -> None:
        with self._lock:
            self._finished[reason] += 1

    def record_prefix_cache(self, queries: int, hits: int, tokens: int) -> None:
        with self._lock:
            self._cache[0] += queries
            self._cache[1] += hits
            self._cache[2] += tokens

    def set_prefix_cache_evictions(self, total: int) -> None:
        with self._lock:
            self._cache[3] = total

    def set_prefix_cache_unprofitable(self, restores: int, captures: int) -> None:
        with self._lock:
            self._unprofitable = (restores, captures)

    def set_queue(self, running: int, waiting: int, preempted: int = 0) -> None:
        with self._lock:
            self._running, self._waiting, self._preempted = running, waiting, preempted

    def record_preemption(self) -> None:
        with self._lock:
            self._preemptions += 1

    def record_phases(self, queue_s: float, prefill_s: float, decode_s: float | None) -> None:
        """A finished request's time waiting for a slot, to its first token, and after it."""
        with self._lock:
            self._phases["queue"] = self._phases["queue"].add(queue_s)
            self._phases["prefill"] = self._phases["prefill"].add(prefill_s)
            if decode_s is not None:
                self._phases["decode"] = self._phases["decode"].add(decode_s)

    def set_usage(self, slots_used: int, num_slots: int, pages_used: int, num_pages: int) -> None:
        """Request slots (one GDN state row each) and KV pages held by requests."""
        with self._lock:
            self._slots = (slots_used, num_slots)
            self._pages = (pages_used, num_pages)

    def snapshot(self) -> StatsSnapshot:
        with self._lock:
            by_source = dict(self._by_source)
            positions: Counter[int] = Counter()
            for (_, position), n in self._accepted_by_position.items():
                positions[position] += n
            return StatsSnapshot(
                executions_by_kind=_by_kind(self._executions),
                execution_ns_by_kind=_by_kind(self._execution_ns),
                executions_by_kind_class=dict(self._executions),
                execution_ns_by_kind_class=dict(self._execution_ns),
                speculative_rounds=sum(c.rounds for c in by_source.values()),
                speculative_draft_tokens=sum(c.draft_tokens for c in by_source.values()),
                speculative_accepted_tokens=sum(c.accepted_tokens for c in by_source.values()),
                accepted_by_position=dict(positions),
                speculative_by_source=by_source,
                accepted_by_source_position=dict(self._accepted_by_position),
                finished_by_reason=dict(self._finished),
                prompt_tokens=self._prompt_tokens,
                output_tokens=self._output_tokens,
                running=self._running,
                waiting=self._waiting,
                preempted=self._preempted,
                preemptions=self._preemptions,
                prefix_cache_queries=self._cache[0],
                prefix_cache_hits=self._cache[1],
                prefix_cache_restored_tokens=self._cache[2],
                prefix_cache_evictions=self._cache[3],
                prefix_cache_unprofitable_restores=self._unprofitable[0],
                prefix_cache_unprofitable_captures=self._unprofitable[1],
                slots_used=self._slots[0],
                num_slots=self._slots[1],
                pages_used=self._pages[0],
                num_pages=self._pages[1],
                phases=dict(self._phases),
            )


def _by_kind(counts: Counter[tuple[str, str]]) -> dict[str, int]:
    out: Counter[str] = Counter()
    for (kind, _), n in counts.items():
        out[kind] += n
    return dict(out)
