"""Engine counters as plain numbers, read by /metrics and the test reports.

The engine loop runs on its own thread and the HTTP server reads at scrape
time, so updates and snapshots take one lock; a snapshot is an immutable copy.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field


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
    finished_by_reason: dict[str, int] = field(default_factory=dict)
    prompt_tokens: int = 0
    output_tokens: int = 0
    running: int = 0
    waiting: int = 0


class EngineStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._executions: Counter[tuple[str, str]] = Counter()
        self._execution_ns: Counter[tuple[str, str]] = Counter()
        self._accepted_by_position: Counter[int] = Counter()
        self._finished: Counter[str] = Counter()
        self._speculative_rounds = 0
        self._draft_tokens = 0
        self._accepted_tokens = 0
        self._prompt_tokens = 0
        self._output_tokens = 0
        self._running = 0
        self._waiting = 0

    def record_execution(
        self, kind: str, interval_ns: int, execution_class: str = "ordinary"
    ) -> None:
        """One completed graph of ``kind`` and execution class (ordinary, discovery,
        timing_refresh, acceptance_learning)."""
        with self._lock:
            self._executions[(kind, execution_class)] += 1
            self._execution_ns[(kind, execution_class)] += max(0, int(interval_ns))

    def record_speculation(self, num_offered: int, num_accepted: int) -> None:
        """One lane of one speculative round: drafts offered and the accepted prefix."""
        with self._lock:
            if num_offered <= 0:
                return
            self._speculative_rounds += 1
            self._draft_tokens += num_offered
            self._accepted_tokens += num_accepted
            for position in range(1, num_accepted + 1):
                self._accepted_by_position[position] += 1

    def record_tokens(self, num_prompt: int, num_output: int) -> None:
        with self._lock:
            self._prompt_tokens += num_prompt
            self._output_tokens += num_output

    def record_finished(self, reason: str) -> None:
        with self._lock:
            self._finished[reason] += 1

    def set_queue(self, running: int, waiting: int) -> None:
        with self._lock:
            self._running, self._waiting = running, waiting

    def snapshot(self) -> StatsSnapshot:
        with self._lock:
            return StatsSnapshot(
                executions_by_kind=_by_kind(self._executions),
                execution_ns_by_kind=_by_kind(self._execution_ns),
                executions_by_kind_class=dict(self._executions),
                execution_ns_by_kind_class=dict(self._execution_ns),
                speculative_rounds=self._speculative_rounds,
                speculative_draft_tokens=self._draft_tokens,
                speculative_accepted_tokens=self._accepted_tokens,
                accepted_by_position=dict(self._accepted_by_position),
                finished_by_reason=dict(self._finished),
                prompt_tokens=self._prompt_tokens,
                output_tokens=self._output_tokens,
                running=self._running,
                waiting=self._waiting,
            )


def _by_kind(counts: Counter[tuple[str, str]]) -> dict[str, int]:
    out: Counter[str] = Counter()
    for (kind, _), n in counts.items():
        out[kind] += n
    return dict(out)
