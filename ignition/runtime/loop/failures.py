"""Frames that fail, and rows that fail within a frame."""

from __future__ import annotations

import logging

from ignition.helios import (
    CompletionRecord,
    CompletionReport,
    ConfidenceSidecar,
    ExecutionTiming,
    Fence,
    LaneRole,
    RequestHandle,
    ScheduledPlan,
)
from ignition.runtime.loop.hooks import LoopHooks
from ignition.runtime.loop.lifecycle import Lifecycle
from ignition.runtime.loop.preemption import Preemption

log = logging.getLogger("ignition.engine")
# A request restarted after a shared frame failed gets this many restarts at most.
MAX_RESTARTS = 2


class FrameFailures:
    def __init__(self, lifecycle: Lifecycle, preemption: Preemption, hooks: LoopHooks) -> None:
        self.lifecycle = lifecycle
        self.preemption = preemption
        self.hooks = hooks

    def fail_rows(self, failed: dict[RequestHandle, str]) -> None:
        """End the requests whose rows the worker reported failed, before the frame completes."""
        for handle, message in failed.items():
            live = self.lifecycle.table.live.get(handle)
            if live is not None and not live.is_done:
                log.warning("request %s: %s", live.request.request_id, message)
                self.lifecycle.finish(live, "error", notify_scheduler=True, error=message)

    def fail_frame(self, fence: Fence, plan: ScheduledPlan, err: Exception) -> None:
        """Settle the requests of the oldest frame, which failed, and retire it in Helios."""
        self.settle(fence, plan, err)
        self.retire(fence, plan)

    def settle(self, fence: Fence, plan: ScheduledPlan, err: Exception) -> None:
        """End or restart the requests of a frame that could not execute."""
        message = f"{plan.descriptor.name} failed: {type(err).__name__}: {err}"
        log.error("fence %d: %s", fence.value, message, exc_info=err)
        for after_frame in self.hooks.after_frame:
            after_frame(plan, self.lifecycle.table.live, 0, False)
        involved = [
            live
            for lane in plan.lanes
            if (live := self.lifecycle.table.live.get(lane.handle)) is not None and not live.is_done
        ]
        # A request on probation is the suspect; the others restart uncharged.
        suspect = any(live.probation_output is not None for live in involved)
        for live in involved:
            if live.preempting:  # its preemption snapshot failed: recompute it instead
                self.preemption.failed(live)
                continue
            if suspect:
                guilty = live.probation_output is not None
            else:
                guilty = len(involved) == 1 or live.num_restarts >= MAX_RESTARTS
            live.restart_charged = not suspect
            if guilty:
                self.lifecycle.finish(live, "error", notify_scheduler=True, error=message)
            else:
                self.lifecycle.table.restart(live, self.lifecycle.remaining_output(live))
                self.lifecycle.cancel_in_scheduler(live.handle)
                # The restart runs without retention: its copies are suppressed and its
                # rows freed when the old handle is reaped.
                self.lifecycle.retention.cancel(live.request)

    def retire(self, fence: Fence, plan: ScheduledPlan) -> None:
        """Complete a failed frame in Helios once it is the oldest in flight."""
        records = tuple(
            CompletionRecord(
                lane.handle, lane.num_prompt_tokens if lane.role is LaneRole.PROMPT else 0
            )
            for lane in plan.lanes
        )
        d, sidecar = plan.descriptor, None
        if d.is_device_allocated and d.proposal_depth > 0:
            empty = tuple((0.0,) * d.proposal_depth for _ in range(d.batch_capacity))
            sidecar = ConfidenceSidecar(planes=(empty, empty))
        self.lifecycle.scheduler.complete(
            fence, CompletionReport(records, ExecutionTiming(0), sidecar)
        )
