"""Where the engine loop meets vision windows (helios/vision_windows.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ignition.components.program_kinds import GraphKind
from ignition.helios import (
    LaneRole,
    RequestSpec,
    ScheduledPlan,
    SchedulerError,
    SchedulerProtocol,
    VisionWindow,
    plan_windows,
    window_spec,
)
from ignition.runtime.loop.hooks import Live, Loop, LoopHook
from ignition.runtime.requests.request import GenerationRequest
from ignition.runtime.requests.table import LiveRequest


class WindowRows:
    """Private snapshot rows ``[first, first + count)``, one per windowed request."""

    def __init__(self, first: int, count: int) -> None:
        self._free = list(range(first, first + count))
        self._owned: dict[str, int] = {}

    @property
    def num_free(self) -> int:
        return len(self._free)

    def take(self, owner: str) -> int | None:
        if owner in self._owned:
            return self._owned[owner]
        if not self._free:
            return None
        row = self._free.pop(0)
        self._owned[owner] = row
        return row

    def release(self, owner: str) -> None:
        row = self._owned.pop(owner, None)
        if row is not None:
            self._free.append(row)


@dataclass(frozen=True)
class WindowAdmission:
    windows: tuple[VisionWindow, ...]
    spec: RequestSpec  # the first generation's
    row: int | None  # the private snapshot row (multi-window requests only)


class VisionWindowHooks(LoopHook):
    """``feature_capacity``: features the prepared storage holds per request (0: no bound)."""

    def __init__(self, feature_capacity: int = 0, rows: WindowRows | None = None) -> None:
        self.feature_capacity = feature_capacity
        self.rows = rows
        self._vision_programs: tuple[int, ...] = ()

    def admit(
        self, request: GenerationRequest, spec: RequestSpec, scheduler: SchedulerProtocol
    ) -> WindowAdmission | None:
        """The request's windows and first spec; None while it waits for a private row."""
        if request.images is None:
            return WindowAdmission((), spec, None)
        windows = plan_windows(spec.image_spans, spec.num_prompt_tokens, self.feature_capacity)
        self._vision_programs = _vision_capacities(scheduler)
        if len(windows) == 1:
            return WindowAdmission(windows, self._with_vision(spec, request, windows[0]), None)
        if not scheduler.programs().state:
            raise SchedulerError(
                f"the images need {len(windows)} vision windows of at most "
                f"{self.feature_capacity} features; only Helios schedules window snapshots"
            )
        if self.rows is None:
            raise SchedulerError(
                f"the images need {len(windows)} vision windows of at most "
                f"{self.feature_capacity} features, and no private snapshot row is prepared"
            )
        row = self.rows.take(request.request_id)
        if row is None:
            return None
        first = self._with_vision(window_spec(spec, windows, 0), request, windows[0])
        return WindowAdmission(windows, first, row)

    def _with_vision(
        self, spec: RequestSpec, request: GenerationRequest, window: VisionWindow
    ) -> RequestSpec:
        """The window's vision prerequisite, when a vision program holds its largest image."""
        assert request.images is not None
        patches = max((request.images.grids[i].num_patches for i in window.images), default=0)
        if not patches or not any(c >= patches for c in self._vision_programs):
            return spec
        return replace(spec, vision_patches=patches)

    def release(self, request: GenerationRequest) -> None:
        if self.rows is not None:
            self.rows.release(request.request_id)

    def on_reap(self, live, current: bool) -> None:
        """The private row goes back with the request, not while a restart continues it."""
        if current:
            self.release(live.request)

    def before_launch(self, plan: ScheduledPlan, live: Mapping) -> None:
        """Window snapshots and restores copy through the request's private row."""
        for lane in plan.lanes:
            request = live.get(lane.handle)
            if request is None or len(request.windows) < 2:
                continue
            if lane.role in (LaneRole.SNAPSHOT, LaneRole.RESTORE):
                request.state_row = request.window_row
                request.state_ok = True

    def after_complete(self, plan: ScheduledPlan, loop: Loop) -> None:
        """A request whose window snapshot completed continues under a fresh generation."""
        for live in self._held_after(plan, loop.table.live, loop.scheduler):
            old = live.handle
            loop.scheduler.cancel(old)
            loop.worker.release(old)
            handle = loop.scheduler.admit(self._next_spec(live))
            loop.worker.carry_history(old, handle)
            loop.table.rebind(live, handle)

    def _held_after(
        self, plan: ScheduledPlan, live: Live, scheduler: SchedulerProtocol
    ) -> list[LiveRequest]:
        """Live requests whose window snapshot just completed (ready to rebind)."""
        out = []
        for lane in plan.lanes:
            request = live.get(lane.handle)
            if lane.role is not LaneRole.SNAPSHOT or request is None or request.is_done:
                continue
            state = scheduler.request(lane.handle)
            if state is not None and state.is_window_held:
                out.append(request)
        return out

    def _next_spec(self, request: LiveRequest) -> RequestSpec:
        """The spec of the request's next window's generation (advances its index)."""
        request.window_index += 1
        window = request.windows[request.window_index]
        assert request.base_spec is not None  # set at admission for a windowed request
        spec = window_spec(request.base_spec, request.windows, request.window_index)
        return self._with_vision(spec, request.request, window)


def _vision_capacities(scheduler: SchedulerProtocol) -> tuple[int, ...]:
    """Patch capacities of the vision programs ``scheduler`` schedules as prerequisites."""
    state = scheduler.programs().state
    return tuple(d.patch_capacity for d in state if d.kind is GraphKind.VISION)
