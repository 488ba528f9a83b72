"""What the host tracks per request between frames, shared by every executor."""

from __future__ import annotations

from dataclasses import dataclass, field

from ignition.helios import LaneWork, RequestHandle
from ignition.runtime.vision.binding import RequestVision


@dataclass
class RequestLedger:
    prompt_cursor: dict[RequestHandle, int] = field(default_factory=dict)
    # Committed past the published output (a stop inside an accepted burst).
    overrun: set[RequestHandle] = field(default_factory=set)
    # Device sampling history (penalties, bias, min_tokens) reset: by the frame carrying the
    # first prompt chunk, or rebuilt by a restore, or carried from a previous vision window.
    begun: set[RequestHandle] = field(default_factory=set)
    # Slot state started by an init or restore lane (no eager reset at the first chunk).
    started: set[RequestHandle] = field(default_factory=set)
    # Program frames launched and not yet read: while one is, the request's pending token
    # lives only on the device and its PLE rows are not known at launch.
    unread: dict[RequestHandle, int] = field(default_factory=dict)
    vision: dict[RequestHandle, RequestVision] = field(default_factory=dict)

    def mark_launched(self, lanes: tuple[LaneWork, ...]) -> None:
        for lane in lanes:
            self.unread[lane.handle] = self.unread.get(lane.handle, 0) + 1

    def mark_read(self, lanes: tuple[LaneWork, ...]) -> None:
        for lane in lanes:
            left = self.unread.get(lane.handle, 0) - 1
            if left > 0:
                self.unread[lane.handle] = left
            else:
                self.unread.pop(lane.handle, None)

    def forget(self, handle: RequestHandle) -> None:
        self.unread.pop(handle, None)
        self.vision.pop(handle, None)
        self.prompt_cursor.pop(handle, None)
        self.overrun.discard(handle)
        self.begun.discard(handle)
        self.started.discard(handle)
