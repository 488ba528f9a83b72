"""Preemption and resume: when KV pages run out, a resident request gives way."""

from __future__ import annotations

import logging

from ignition.helios import ScheduledPlan
from ignition.runtime.loop.hooks import Live, LoopHook
from ignition.runtime.loop.lifecycle import Lifecycle, retired_in
from ignition.runtime.requests.table import LiveRequest, RequestState

log = logging.getLogger("ignition.engine")


class Preemption(LoopHook):
    """The loop's ``on_shortage`` point, and its ``after_publish`` point for a preempted
    request whose snapshot completed; frame failures tell it when one failed (``failed``)."""

    def __init__(self, lifecycle: Lifecycle) -> None:
        self.lifecycle = lifecycle
        self.table = lifecycle.table

    @property
    def num_preempting(self) -> int:
        return sum(1 for live in self.table.live.values() if live.preempting)

    @property
    def resume(self) -> tuple[LiveRequest, ...]:
        """Preempted requests waiting to resume, oldest first."""
        return tuple(self.table.resuming)

    def on_shortage(self, plan: ScheduledPlan) -> bool:
        """The queue is empty and ``plan`` cannot get its pages: free some."""
        lc, table = self.lifecycle, self.table
        scheduler, retention = lc.scheduler, lc.retention
        pending = [live for live in table.live.values() if live.preempting]
        if pending:  # the preemption snapshot lost to the blocked winner: recompute instead
            for live in pending:
                log.info("%s: preemption snapshot lost; recomputing", live.request.request_id)
                scheduler.retire_without_snapshot(live.handle)
                retention.cancel(live.request)
                table.resume(live)
            return True
        choice = scheduler.preemption_victim(plan)
        if choice is None:
            usage = scheduler.usage()
            message = (
                f"the KV page pool ({usage.num_pages} pages of {usage.page_size_tokens} "
                "tokens) cannot hold this request"
            )
            for lane in plan.lanes:
                live = table.live.get(lane.handle)
                if live is not None and not live.is_done:
                    lc.finish(live, "error", notify_scheduler=True, error=message)
            return True
        victim = table.live[choice.handle]
        if choice.holds_pages:
            lc.stats.record_preemption()
            log.info("%s: preempted (KV pages exhausted)", victim.request.request_id)
        else:  # holds no pages: it is deferred, not preempted
            log.debug("%s: deferred (KV pages exhausted)", victim.request.request_id)
        table.preempt(victim, lc.remaining_output(victim))
        if choice.holds_pages and retention.preempt(victim, lc.now_ns()):
            scheduler.preempt(victim.handle)  # its terminal snapshot frees slot and pages
            return True
        lc.cancel_in_scheduler(victim.handle)
        retention.cancel(victim.request)
        table.resume(victim)
        return True

    def after_publish(self, plan: ScheduledPlan, live: Live) -> None:
        """A preemption snapshot completed in ``plan``: its request waits to resume."""
        for request in retired_in(plan, live):
            if request.state is RequestState.PREEMPTED:
                self.table.resume(request)

    def failed(self, live: LiveRequest) -> None:
        """The preemption snapshot's frame failed: resume by recomputation."""
        self.lifecycle.cancel_in_scheduler(live.handle)
        self.lifecycle.retention.cancel(live.request)
        self.table.resume(live)
