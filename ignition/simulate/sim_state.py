"""The simulator's per-request and per-frame state: a stream per request, a frame in
flight on the device, and the frame's record for the room's common result."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ignition.helios import CompletionRecord, LaneRole, RequestHandle, ScheduledPlan
from ignition.simulate.results import ORDINARY, ExecutionRecord, RequestRecord
from ignition.simulate.scenario import SimRequest

NS_PER_MS = 1_000_000


@dataclass
class Stream:
    index: int
    request: SimRequest
    handle: RequestHandle | None = None
    remaining_output: int = 0
    context: int = 0  # tokens cached on the device: prompt consumed plus output
    record: RequestRecord | None = None
    ready_ns: int | None = None  # prompt rows delivered (devices with ``prompt_ready_ms``)

    @property
    def first_output_ms(self) -> float | None:
        return self.record.first_output_ms if self.record else None

    @property
    def finish_ms(self) -> float | None:
        return self.record.finish_ms if self.record else None

    @property
    def deliveries(self) -> list[tuple[float, int]]:
        return self.record.deliveries if self.record else []

    @property
    def arrival_ns(self) -> int:
        """Admission and the clock use this one integer nanosecond arrival time."""
        return round(self.request.arrival_ms * NS_PER_MS)


@dataclass
class Running:
    fence: int
    plan: ScheduledPlan
    commit_ns: int
    start_ns: int
    end_ns: int
    device_ns: int
    execution_class: str = ORDINARY
    idle_decoders: int = 0  # resident decoders the plan left out


def execution_record(
    run: Running, records: Sequence[CompletionRecord], rows: Sequence[int]
) -> ExecutionRecord:
    """A completed frame as the room's ExecutionRecord (``rows``: each lane's verified rows)."""
    plan = run.plan
    d = plan.descriptor
    return ExecutionRecord(
        start_ms=run.start_ns / NS_PER_MS,
        end_ms=run.end_ns / NS_PER_MS,
        kind=d.kind.value,
        graph=d.name,
        execution_class=run.execution_class,
        rows=len(plan.lanes),
        tokens=sum(r.num_prompt_tokens for r in records) + sum(rows),
        prompt_tokens=sum(r.num_prompt_tokens for r in records),
        decoders=sum(1 for lane in plan.lanes if lane.role is not LaneRole.PROMPT),
        width=max(
            (
                q
                for lane, q in zip(plan.lanes, rows, strict=True)
                if lane.role is not LaneRole.PROMPT
            ),
            default=0,
        ),
        idle_decoders=run.idle_decoders,
    )
