"""The served engine's side of the trace: a loop hook turning each completed frame into records."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ignition.helios import ResourceUsage, ScheduledPlan
from ignition.runtime.executors.frames import FrameResult
from ignition.runtime.loop.hooks import Live, LoopHook
from ignition.runtime.requests.table import LiveRequest
from ignition.runtime.tracing.recorder import TraceRecorder
from ignition.runtime.tracing.records import frame_record


@dataclass
class _Launch:
    number: int
    launch_ns: int
    requests: list[str]
    arrivals: list[int]


class TraceHook(LoopHook):
    """Records frames, waits, deliveries and counters of one engine."""

    def __init__(
        self,
        recorder: TraceRecorder,
        waiting: Callable[[], int],
        usage: Callable[[], ResourceUsage],
        clock_ns: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self.recorder = recorder
        self.waiting = waiting
        self.usage = usage
        self.clock_ns = clock_ns
        self._launched: dict[int, _Launch] = {}
        self._seen: set[str] = set()
        self._device_free_ns = 0
        self._num_launched = 0  # the frame's number in launch order (the engine's fence order)

    def before_launch(self, plan: ScheduledPlan, live: Live) -> None:
        requests, arrivals = [], []
        for lane in plan.lanes:
            request = live.get(lane.handle)
            name = request.request.request_id if request is not None else f"slot {lane.handle.slot}"
            requests.append(name)
            arrivals.append(request.arrival_ns if request is not None else 0)
            if request is not None and name not in self._seen:
                self._seen.add(name)
                self.recorder.wait(name, request.arrival_ns, request.admitted_ns)
        self._launched[id(plan)] = _Launch(self._num_launched, self.clock_ns(), requests, arrivals)
        self._num_launched += 1

    def after_frame(self, plan: ScheduledPlan, live: Live, device_ns: int, ok: bool) -> None:
        if not ok:
            self._launched.pop(id(plan), None)

    def on_frame(self, plan: ScheduledPlan, result: FrameResult) -> None:
        launch = self._launched.pop(id(plan), None)
        if launch is None:
            return
        now = self.clock_ns()
        measured = result.timing.device_ns or max(0, now - launch.launch_ns)
        start = max(self._device_free_ns, now - measured)
        self._device_free_ns = start + measured
        tokens = [len(r.token_ids) for r in result.records]
        offered = list(result.num_offered_drafts) or [0] * len(plan.lanes)
        if len(tokens) != len(plan.lanes) or len(offered) != len(plan.lanes):
            return  # a worker that reports lanes out of plan order: nothing to attribute
        record = frame_record(plan, launch.number, start, measured, launch.requests, tokens, offered)
        self.recorder.frame(record)
        self.recorder.deliver(now, list(zip(launch.requests, tokens, launch.arrivals, strict=True)))
        usage = self.usage()
        self.recorder.counters(
            now,
            {
                "queue": {"waiting": self.waiting(), "running": usage.num_request_slots
                          - usage.num_free_slots},  # fmt: skip
                "pages": {"used": usage.num_pages - usage.num_free_pages,
                          "free": usage.num_free_pages},  # fmt: skip
                "prices": {"value_rate": plan.value_rate, "log_scale": plan.log_scale},
            },
        )

    def on_reap(self, live: LiveRequest, current: bool) -> None:
        if current:
            name = live.request.request_id
            self._seen.discard(name)
            self.recorder.forget(name)


def install_trace_hook(engine, recorder: TraceRecorder) -> TraceHook:
    """Add a trace hook to ``engine`` (a runtime Engine), replacing any earlier one."""
    hook = TraceHook(
        recorder,
        waiting=lambda: len(engine.table.waiting),
        usage=lambda: engine.scheduler.usage(),
    )
    engine.hooks.replace(TraceHook, hook)
    return hook
