"""The seam every executor meets: the protocol, its error, and a frame done at launch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ignition.helios import CompletionRecord, ExecutionTiming, Fence, RequestHandle, ScheduledPlan
from ignition.runtime.executors.frames import FrameResult

if TYPE_CHECKING:
    from ignition.runtime.requests.table import LiveRequest


class WorkerError(RuntimeError):
    """A plan the prepared programs cannot execute (a runtime contract violation)."""


class Executor(Protocol):
    """Runs the plans of its graph kinds on the prepared programs or state operations."""

    def launch(
        self, plan: ScheduledPlan, fence: Fence, live: dict[RequestHandle, LiveRequest]
    ) -> object: ...

    def wait(self, launched) -> FrameResult: ...


@dataclass
class SettledFrame:
    """A frame whose work ran at launch: ``wait`` only reports empty records."""

    fence: Fence
    plan: ScheduledPlan
    device_ns: int
    wall_ns: int

    def result(self) -> FrameResult:
        records = tuple(CompletionRecord(lane.handle) for lane in self.plan.lanes)
        return FrameResult(records, ExecutionTiming(self.device_ns, self.wall_ns))
