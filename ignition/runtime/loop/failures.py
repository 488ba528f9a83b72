"""Frames that fail, and rows that fail within a frame.

Failures stay with the requests that caused them. A frame that cannot execute
ends its request when it ran alone; a frame shared by several requests cannot
say whose input broke it, so each of them restarts from its prompt plus the
output it already has, on probation: probation requests are readmitted one at a
time, and one that fails again (or fails alone) is the one that ends with an
error; the requests sharing that frame with it restart without being charged. A
request whose publication raises ends alone.

A frame fails at launch while older frames may still be in flight: its requests are
settled at once (no later plan serves them), and the frame stays in the engine's queue
until it is the oldest, when Helios retires it, so fences complete in commit order and
the frames around it go on.

Anything else that escapes a step means the loop cannot continue: :meth:`Engine.fail_all`
ends every open request with an error so the caller can stop cleanly.
"""

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
        """End the requests whose rows the worker reported failed (a non-finite sampling
        distribution), before the frame completes: cancelled first, Helios accepts their
        token-less records, and the frame's other requests go on untouched."""
        for handle, message in failed.items():
            live = self.lifecycle.table.live.get(handle)
            if live is not None and not live.is_done:
                log.warning("request %s: %s", live.request.request_id, message)
                self.lifecycle.finish(live, "error", notify_scheduler=True, error=message)

    def fail_frame(self, fence: Fence, plan: ScheduledPlan, err: Exception) -> None:
        """Settle the requests of the oldest frame in flight, which could not execute (its
        wait or its completion failed), and retire it in Helios."""
        self.settle(fence, plan, err)
        self.retire(fence, plan)

    def settle(self, fence: Fence, plan: ScheduledPlan, err: Exception) -> None:
        """End or restart the requests of a frame that could not execute.

        A request that ran alone, was already on probation or has used its restarts ends
        with the error; the others restart (see the module docstring). Either way they are
        cancelled in Helios at once, so no later plan serves them and Helios accepts the
        frame's records without tokens when :meth:`retire` completes it. Their slots and
        pages come back when the frame is retired and they are reaped (an older frame of
        theirs may still run on the device).
        """
        message = f"{plan.descriptor.name} failed: {type(err).__name__}: {err}"
        log.error("fence %d: %s", fence.value, message, exc_info=err)
        for after_frame in self.hooks.after_frame:
            after_frame(plan, self.lifecycle.table.live, 0, False)
        involved = [
            live
            for lane in plan.lanes
            if (live := self.lifecycle.table.live.get(lane.handle)) is not None and not live.is_done
        ]
        # A request on probation already failed once in a shared frame: when it is in
        # this one too it is the suspect, and the others restart without being charged
        # (otherwise one bad input could exhaust an innocent's restarts).
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
                self.lifecycle.table.restart(live)
                self.lifecycle.cancel_in_scheduler(live.handle)
                # The restart runs without retention: its copies are suppressed and its
                # rows freed when the old handle is reaped.
                self.lifecycle.retention.cancel(live.request)

    def retire(self, fence: Fence, plan: ScheduledPlan) -> None:
        """Complete a failed frame in Helios when it is the oldest in flight (Helios
        completes fences in order): records without tokens for its settled requests, zero
        device time (no cost observation)."""
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
