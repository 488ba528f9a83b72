"""The state-copy executor: initialization, restore and snapshot frames (compiler.state_ops)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ignition.helios import Fence, LaneRole, RequestHandle, ScheduledPlan
from ignition.runtime.executors.base import SettledFrame, WorkerError
from ignition.runtime.executors.context import ExecutorContext
from ignition.runtime.executors.frames import FrameResult
from ignition.runtime.executors.history import restore_history

if TYPE_CHECKING:
    from ignition.runtime.requests.table import LiveRequest


class StateCopyExecutor:
    def __init__(self, context: ExecutorContext) -> None:
        self.context = context

    def launch(
        self, plan: ScheduledPlan, fence: Fence, live: dict[RequestHandle, LiveRequest]
    ) -> SettledFrame:
        """Initialize fresh slots, restore rows into them, or copy slots into snapshot rows."""
        context = self.context
        state_ops, resources, ledger = context.state_ops, context.resources, context.ledger
        if state_ops is None:
            raise WorkerError(f"fence {fence.value}: no prepared state operations")
        began = time.perf_counter_ns()
        device_ns = 0
        for lane in plan.lanes:
            row = live[lane.handle].state_row
            slot = lane.handle.slot
            if lane.role is LaneRole.INIT:
                resources.begin(slot, reset_state=False)
                device_ns += state_ops.initialize(slot)
                ledger.started.add(lane.handle)
            elif lane.role is LaneRole.RESTORE:
                if row is None:
                    raise WorkerError(f"fence {fence.value}: restore of {lane.handle} has no row")
                resources.begin(slot, reset_state=False)  # the restore writes it
                resources.reserve(slot, lane.checkpoint_tokens, lookahead=1)
                # The restore writes into the pages the *device* table names: the ones just
                # assigned on the host must reach it first, or the prefix lands in the
                # previous occupant's pages (or the scratch page).
                context.sync_page_table()
                device_ns += state_ops.restore(slot, row)
                ledger.prompt_cursor[lane.handle] = lane.checkpoint_tokens
                restore_history(context, lane, live[lane.handle])
            elif row is not None:
                # Capture only a state whose length is exactly the checkpoint's (known on
                # the host: launching never reads the device).
                if lane.role is LaneRole.TERMINAL and lane.handle in ledger.overrun:
                    live[lane.handle].state_ok = False
                    continue
                context.sync_page_table()
                device_ns += state_ops.snapshot(slot, row)
        return SettledFrame(fence, plan, device_ns, time.perf_counter_ns() - began)

    def wait(self, launched: SettledFrame) -> FrameResult:
        return launched.result()
