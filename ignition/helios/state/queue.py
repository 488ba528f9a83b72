"""The execution queue: two frame slots."""

from __future__ import annotations

from dataclasses import dataclass, field

from ignition.helios.plans import LaneWork, ScheduledPlan
from ignition.helios.state.rates import Normalizers
from ignition.helios.types import RequestHandle

NUM_FRAME_SLOTS = 2


@dataclass(frozen=True)
class Participant:
    """A resident runnable request recorded at commit; unselected ones get zero service."""

    handle: RequestHandle
    was_decoder: bool


@dataclass
class Frame:
    fence: int
    plan: ScheduledPlan
    participants: tuple[Participant, ...]
    norms: Normalizers
    expected_start_ns: int
    needs_feedback: bool
    was_queued: bool = False
    participant_handles: frozenset[RequestHandle] = field(init=False, repr=False)
    lanes_by_handle: dict[RequestHandle, LaneWork] = field(init=False, repr=False)
    participant_generations: dict[int, int] = field(init=False, repr=False)
    lanes_by_slot: dict[int, LaneWork] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.participant_handles = frozenset(p.handle for p in self.participants)
        self.participant_generations = {
            p.handle.slot: p.handle.generation for p in self.participants
        }
        self.lanes_by_handle = {}
        for lane in self.plan.lanes:
            self.lanes_by_handle.setdefault(lane.handle, lane)  # lane_of keeps the first
        self.lanes_by_slot = {h.slot: lane for h, lane in self.lanes_by_handle.items()}

    @property
    def expected_end_ns(self) -> int:
        return self.expected_start_ns + self.plan.estimated_duration_ns


class ExecutionQueue:
    def __init__(self) -> None:
        self.frames: list[Frame] = []
        self.is_suspended = False

    def __len__(self) -> int:
        return len(self.frames)

    @property
    def is_empty(self) -> bool:
        return not self.frames

    def expected_end_ns(self, now_ns: int) -> int:
        return max([now_ns, *(f.expected_end_ns for f in self.frames)])

    def why_closed(self) -> str | None:
        """Why nothing more may be queued now (None when a queueable frame may join)."""
        if len(self.frames) >= NUM_FRAME_SLOTS:
            return "both frame slots are occupied"
        if any(f.needs_feedback for f in self.frames):
            return "a queued frame needs completion feedback before another graph is queued"
        if self.is_suspended:
            return "queueing is suspended after an overrun until completion feedback"
        return None

    def note_time(self, now_ns: int) -> None:
        if self.frames and now_ns > self.frames[0].expected_end_ns:
            self.is_suspended = True

    def push(self, frame: Frame) -> None:
        if self.frames:
            frame.was_queued = True
            for f in self.frames:
                f.was_queued = True
        self.frames.append(frame)

    def head(self) -> Frame | None:
        return self.frames[0] if self.frames else None

    def pop_head(self) -> Frame:
        frame = self.frames.pop(0)
        self.is_suspended = False
        return frame
