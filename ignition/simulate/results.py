"""What one simulated run produced, in the same shape for Helios and every baseline:
metrics, plots and the capacity search read only this, so a policy is compared on what
its users saw and what its device spent, nothing else."""

from __future__ import annotations

from dataclasses import dataclass, field

ORDINARY = "ordinary"


@dataclass
class RequestRecord:
    """One request's life: arrival, every visible delivery ``(time_ms, tokens)``, finish."""

    id: int
    arrival_ms: float
    prompt_tokens: int
    output_tokens: int
    admitted_ms: float | None = None
    prompt_start_ms: float | None = None  # start of the first frame that consumed its prompt
    # the host's gather of its prompt rows, (start, rows on the device), on a device with
    # ``prompt_ready_ms``; None where it needs none (what ``host_chain`` reads)
    prompt_rows_ms: tuple[float, float] | None = None
    first_output_ms: float | None = None
    finish_ms: float | None = None
    deliveries: list[tuple[float, int]] = field(default_factory=list)
    # generation rounds it took part in and the target rows they verified (1 + drafts
    # each): the mean verification width a policy gave it (``mean_width``)
    rounds: int = 0
    verified_rows: int = 0

    def verified(self, rows: int) -> None:
        self.rounds += 1
        self.verified_rows += rows

    @property
    def mean_width(self) -> float:
        return self.verified_rows / self.rounds if self.rounds else 0.0

    def deliver(self, t_ms: float, count: int, remaining: int) -> None:
        if count <= 0:
            return
        self.deliveries.append((t_ms, count))
        if self.first_output_ms is None:
            self.first_output_ms = t_ms
        if remaining <= 0 and self.finish_ms is None:
            self.finish_ms = t_ms


@dataclass(frozen=True)
class ExecutionRecord:
    """One device execution. ``execution_class`` is what the policy called it
    (``ordinary`` unless the scheduler's trace entry names another class).

    ``prompt_tokens`` counts the prompt tokens it consumed, ``decoders`` the decoding
    rows it served, ``width`` their widest target extent (1 + drafts) and
    ``idle_decoders`` the resident decoders it left out (for Helios some of them may be
    in the frame queued beside it): what ``frame_mix`` reads to explain a policy's
    capacity and TBT."""

    start_ms: float
    end_ms: float
    kind: str
    graph: str
    execution_class: str = ORDINARY
    rows: int = 0
    tokens: int = 0
    prompt_tokens: int = 0
    decoders: int = 0
    width: int = 0
    idle_decoders: int = 0

    @property
    def device_ms(self) -> float:
        return self.end_ms - self.start_ms


@dataclass
class RunResult:
    policy: str
    requests: list[RequestRecord]
    executions: list[ExecutionRecord]
    end_ms: float
    slots: int = 0
    info: dict = field(default_factory=dict)

    @property
    def output_tokens(self) -> int:
        return sum(n for r in self.requests for _, n in r.deliveries)

    @property
    def finished(self) -> int:
        return sum(1 for r in self.requests if r.finish_ms is not None)
