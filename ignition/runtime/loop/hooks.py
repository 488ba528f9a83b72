"""The named points where retention, vision windows, preemption, fault injection and frame
listeners meet the engine loop."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from ignition.helios import RequestHandle, ScheduledPlan, SchedulerProtocol
from ignition.runtime.executors.frames import FrameResult, Worker
from ignition.runtime.requests.table import LiveRequest, RequestTable

Live = Mapping[RequestHandle, LiveRequest]


class Loop(Protocol):
    """What the engine lends a hook that moves a request between Helios generations."""

    scheduler: SchedulerProtocol
    worker: Worker
    table: RequestTable


class LoopHook:
    """The points a hook may implement, each a no-op here: a hook overrides only the ones
    it needs (LoopHooks calls nothing else)."""

    def on_step(self, live: Sequence[LiveRequest]) -> None:
        """Each turn, before planning, with the live requests."""

    def on_shortage(self, plan: ScheduledPlan) -> bool:
        """``plan``'s commit found no pages and nothing is in flight; True: it acted."""
        return False

    def before_launch(self, plan: ScheduledPlan, live: Live) -> None:
        """A committed plan is about to launch (name its state rows)."""

    def after_frame(self, plan: ScheduledPlan, live: Live, device_ns: int, ok: bool) -> None:
        """A frame completed in Helios (``ok``) or failed (device time 0)."""

    def after_complete(self, plan: ScheduledPlan, loop: Loop) -> None:
        """Helios accepted a frame's completion; its tokens are not yet published."""

    def before_publish(self, live: LiveRequest) -> None:
        """A request is about to publish a completed frame's tokens."""

    def after_publish(self, plan: ScheduledPlan, live: Live) -> None:
        """A completed frame's tokens were published: what waited for its snapshot goes on."""

    def on_frame(self, plan: ScheduledPlan, result: FrameResult) -> None:
        """After a frame completed and published: observers (timing, tests)."""

    def on_reap(self, live: LiveRequest, current: bool) -> None:
        """A done handle left the table; ``current``: the request is gone."""


POINTS = (
    "on_step",
    "on_shortage",
    "before_launch",
    "after_frame",
    "after_complete",
    "before_publish",
    "after_publish",
    "on_frame",
    "on_reap",
)


class LoopHooks:
    """An engine's hooks in order, and per point the bound methods of those that implement
    it (a hook that inherits :class:`LoopHook`'s no-op there is left out)."""

    def __init__(self, hooks: Sequence[LoopHook]) -> None:
        self._hooks = list(hooks)
        self.on_step: list[Callable[[Sequence[LiveRequest]], None]] = []
        self.on_shortage: list[Callable[[ScheduledPlan], bool]] = []
        self.before_launch: list[Callable[[ScheduledPlan, Live], None]] = []
        self.after_frame: list[Callable[[ScheduledPlan, Live, int, bool], None]] = []
        self.after_complete: list[Callable[[ScheduledPlan, Loop], None]] = []
        self.before_publish: list[Callable[[LiveRequest], None]] = []
        self.after_publish: list[Callable[[ScheduledPlan, Live], None]] = []
        self.on_frame: list[Callable[[ScheduledPlan, FrameResult], None]] = []
        self.on_reap: list[Callable[[LiveRequest, bool], None]] = []
        self._index()

    def __iter__(self):
        return iter(self._hooks)

    def replace(self, kind: type, hook: LoopHook | None) -> None:
        """Drop the hooks of type ``kind``, then append ``hook`` (if any)."""
        self._hooks = [h for h in self._hooks if not isinstance(h, kind)]
        if hook is not None:
            self._hooks.append(hook)
        self._index()

    def _index(self) -> None:
        for point in POINTS:
            default = getattr(LoopHook, point)
            methods = [
                getattr(h, point) for h in self._hooks if getattr(type(h), point) is not default
            ]
            getattr(self, point)[:] = methods


class FaultHook(LoopHook):
    """Test-only fault injection (runtime/loop/faults.py): ``check(stage, request)`` raises for
    the requests it marks, at the ``step`` and ``publish`` points."""

    def __init__(self, check: Callable[[str, LiveRequest], None]) -> None:
        self.check = check

    def on_step(self, live: Sequence[LiveRequest]) -> None:
        for request in live:
            self.check("step", request)

    def before_publish(self, live: LiveRequest) -> None:
        self.check("publish", live)


class FrameListeners(LoopHook):
    """Callables told ``(plan, result)`` after each completed frame."""

    def __init__(self) -> None:
        self.listeners: list[Callable[[ScheduledPlan, FrameResult], None]] = []

    def on_frame(self, plan: ScheduledPlan, result: FrameResult) -> None:
        for listener in self.listeners:
            listener(plan, result)
