"""What the worker reports for a completed frame: per-lane records, timing, the confidence
sidecar, and the tokens ``complete`` hands back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ignition.helios.types import Fence, RequestHandle, SchedulerError


@dataclass(frozen=True)
class CompletionRecord:
    """What the device reports for one lane."""

    handle: RequestHandle
    num_prompt_tokens: int = 0
    token_ids: tuple[int, ...] = ()
    is_finished: bool = False
    num_verified_tokens: int = 0


@dataclass(frozen=True)
class ExecutionTiming:
    """``device_ns``: the maximum rank-local replay interval (0 = missing);
    ``wall_ns``: host dispatch through observed completion; ``readiness_stall_ns``:
    exposed embedding-delivery delay removed from cost samples only."""

    device_ns: int
    wall_ns: int = 0
    readiness_stall_ns: int = 0
    rank_device_ns: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if min(self.device_ns, self.wall_ns, self.readiness_stall_ns, *self.rank_device_ns) < 0:
            raise SchedulerError("execution timing intervals must be nonnegative")
        if self.rank_device_ns and self.device_ns != max(self.rank_device_ns):
            raise SchedulerError(
                f"device_ns {self.device_ns} is not the maximum of the ranks' intervals "
                f"{list(self.rank_device_ns)}"
            )

    @classmethod
    def across_ranks(
        cls, rank_device_ns: tuple[int, ...], wall_ns: int = 0, readiness_stall_ns: int = 0
    ) -> ExecutionTiming:
        """The frame's timing from every rank's interval: the cost sample is their maximum
        (a rank that measured nothing, 0, leaves the others' maximum)."""
        return cls(max(rank_device_ns, default=0), wall_ns, readiness_stall_ns, rank_device_ns)


@dataclass(frozen=True)
class ConfidenceSidecar:
    """The FP32 sidecar of a confidence-producing program, shape [2, request_slots, D]."""

    planes: tuple[tuple[tuple[float, ...], ...], tuple[tuple[float, ...], ...]]

    def joint_prefix(self, lane_index: int) -> tuple[float, ...]:
        return self.planes[0][lane_index]


@dataclass(frozen=True)
class CompletionReport:
    """Everything the worker reports for one completed frame: one record per lane, the
    timing, the confidence sidecar a device-allocated speculative round (D > 0) must
    carry, and the completion_speculative_survival rows (one per lane) where the program
    writes them. ``complete`` validates all of it before changing any state."""

    records: Sequence[CompletionRecord]
    timing: ExecutionTiming
    sidecar: ConfidenceSidecar | None = None
    survival: Sequence[Sequence[float]] | None = None


@dataclass(frozen=True)
class GeneratedToken:
    handle: RequestHandle
    token_id: int
    output_index: int
    fence: Fence
    is_last: bool = False
