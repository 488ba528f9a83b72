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

A preempted request keeps its client stream, sampling settings, usage counts and
output so far. It resumes before any new arrival, once Helios says it fits
(``can_resume``: a free slot and the pages for its whole length, beside what admitted
requests without pages will take and a page of growth per running holder), as a fresh
Helios request whose prompt is the
original prompt plus the output; the retained state is found by prefix like any
checkpoint, so the resume is a restore and a one-token prefill, and its greedy
output is what the unpreempted request would have produced. A lone request the
pool cannot hold ends with an error naming the pool.
"""

from __future__ import annotations

import collections
import logging
from typing import TYPE_CHECKING

from ignition.helios import RequestSpec, ScheduledPlan, SchedulerError
from ignition.runtime.grammar import draft_limit

if TYPE_CHECKING:
    from ignition.runtime.engine import Engine, LiveRequest


def image_spans(request) -> tuple[tuple[int, int], ...]:
    from ignition.runtime.engine import image_spans as spans

    return spans(request)


log = logging.getLogger("ignition.engine")


class Preemption:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.resume: collections.deque[LiveRequest] = collections.deque()

    @property
    def num_preempting(self) -> int:
        return sum(1 for live in self.engine.live.values() if live.preempting and not live.is_done)

    # -- preempting ------------------------------------------------------------------

    def relieve(self, plan: ScheduledPlan) -> None:
        """The queue is empty and ``plan`` cannot get its pages: free some."""
        engine = self.engine
        scheduler = engine.scheduler
        pending = [live for live in engine.live.values() if live.preempting and not live.is_done]
        if pending:  # the preemption snapshot lost to the blocked winner: recompute instead
            for live in pending:
                log.info("%s: preemption snapshot lost; recomputing", live.request.request_id)
                scheduler.retire_without_snapshot(live.handle)
                engine.retention.cancel(live.request)
                self._requeue(live)
            return
        choice = scheduler.preemption_victim(plan)
        if choice is None:
            usage = scheduler.usage()
            message = (
                f"the KV page pool ({usage.num_pages} pages of {usage.page_size_tokens} "
                "tokens) cannot hold this request"
            )
            for lane in plan.lanes:
                live = engine.live.get(lane.handle)
                if live is not None and not live.is_done:
                    engine._finish(live, "error", notify_scheduler=True, error=message)
            return
        victim = engine.live[choice.handle]
        if choice.holds_pages:
            engine.stats.record_preemption()
            log.info("%s: preempted (KV pages exhausted)", victim.request.request_id)
        else:  # holds no pages: it is deferred, not preempted
            log.debug("%s: deferred (KV pages exhausted)", victim.request.request_id)
        if choice.holds_pages and engine.retention.preempt(victim, engine._now_ns()):
            scheduler.preempt(victim.handle)  # its terminal snapshot frees slot and pages
            victim.preempting = True
            return
        engine._cancel_in_scheduler(victim.handle)
        engine.retention.cancel(victim.request)
        self._requeue(victim)

    def retired(self, live: LiveRequest) -> None:
        """The preemption snapshot completed: the request waits to resume."""
        if not live.is_done:
            self._requeue(live)

    def failed(self, live: LiveRequest) -> None:
        """The preemption snapshot's frame failed: resume by recomputation."""
        self.engine._cancel_in_scheduler(live.handle)
        self.engine.retention.cancel(live.request)
        self._requeue(live)

    def _requeue(self, live: LiveRequest) -> None:
        live.is_done = True  # the old handle is reaped once nothing submitted uses it
        self.resume.append(live)

    # -- resuming --------------------------------------------------------------------

    def admit_resumed(self) -> bool:
        """Readmit preempted requests, oldest first; False while one still waits (new
        arrivals queue behind it)."""
        engine = self.engine
        scheduler = engine.scheduler
        while self.resume:
            old = self.resume[0]
            if old.handle in engine.live:
                return False  # its old handle is not reaped yet
            replay = tuple(old.output_ids)
            remaining = old.request.sampling.max_tokens - len(replay)
            if remaining < 1:
                self.resume.popleft()
                engine._finish(old, "length", notify_scheduler=False)
                continue
            prompt = old.request.prompt_ids + replay
            if not scheduler.can_resume(len(prompt), remaining):
                return False
            admission = engine.retention.admit(old.request, engine._now_ns(), prompt_ids=prompt)
            spec = RequestSpec(
                num_prompt_tokens=len(prompt),
                max_output_tokens=remaining,
                context_capacity=engine.max_context_tokens,
                message_endpoints=old.request.message_end_offsets,
                image_spans=image_spans(old.request),
                restore_tokens=admission.restore_tokens,
                capture_ends=admission.capture_ends,
                terminal_snapshot=admission.terminal_snapshot,
                max_drafts=draft_limit(old.request.sampling),
                admitted_ns=old.admitted_ns,
                host_stops=old.request.sampling.has_host_stops,
            )
            try:
                windowed = engine.vision_windows.admit(old.request, spec, scheduler)
                if windowed is None:  # no private window row free yet
                    engine.retention.release(old.request)
                    return False
                handle = scheduler.admit(windowed.spec)
            except SchedulerError:
                engine.retention.release(old.request)
                engine.vision_windows.release(old.request)
                return False
            self.resume.popleft()
            log.info(
                "%s: resumed (%d of %d tokens restored)",
                old.request.request_id,
                admission.restore_tokens,
                len(prompt),
            )
            live = engine._continuation(old, handle, replay)
            live.windows, live.window_row, live.base_spec = windowed.windows, windowed.row, spec
            engine._add_live(live)
        return True

    def cancel(self, request_id: str) -> bool:
        """A client left while its request waited to resume."""
        for i, old in enumerate(self.resume):
            if old.request.request_id == request_id:
                del self.resume[i]
                old.is_done = False
                self.engine._finish(old, "abort", notify_scheduler=False)
                return True
        return False
