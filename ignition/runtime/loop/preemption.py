"""Preemption and resume: when KV pages run out, a resident request gives way.

Helios reserves pages at commit; a commit the free pages cannot cover raises
``ResourceShortage``. With frames in flight the engine just waits (their completion
may free pages). With none, nothing will free pages by itself, so the engine asks
Helios which request gives way (``preemption_victim``: the most recently admitted
among those holding pages and those the blocked plan serves, as vLLM preempts the
latest arrival). A holder is retired without completing its response; a blocked
request holding no pages is only deferred (two requests otherwise preempt each other
forever). A decoder's state goes
through Helios's terminal snapshot into a snapshot row the checkpoint cache
publishes; without one (no retention, no placeable row, a prompt still being
prefilled) the request is simply dropped from Helios to be recomputed. If the
preemption snapshot loses to the blocked winner (the next commit is short again),
the victim's pages are released at once and it too is recomputed.

The request table holds the preempted request (``preempted`` while its snapshot is
pending, then ``resuming``); admission.py readmits it. A preempted request keeps its
client stream, sampling settings, usage counts and output so far. It resumes before any
new arrival, once Helios says it fits
(``can_resume``: a free slot and the pages for its whole length, beside what admitted
requests without pages will take and a page of growth per running holder), as a fresh
Helios request whose prompt is the
original prompt plus the output; the retained state is found by prefix like any
checkpoint, so the resume is a restore and a one-token prefill, and its greedy
output is what the unpreempted request would have produced. A lone request the
pool cannot hold ends with an error naming the pool.
"""

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

    # -- preempting ------------------------------------------------------------------

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
        table.preempt(victim)
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
