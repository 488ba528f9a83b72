"""After each frame published its tokens, what each host source can fill next, told to
Helios: the draft limit of a request with one source (``limit_drafts``: a row without a
proposal verifies none), or an offer per source for a request Helios chooses sources for
(``offer_drafts``: Helios picks the next round's source)."""

from __future__ import annotations

from collections.abc import Callable

from ignition.helios import ScheduledPlan, SchedulerProtocol
from ignition.runtime.executors.frames import FrameResult
from ignition.runtime.loop.hooks import Live, LoopHook
from ignition.runtime.proposals.registry import Proposals


class DraftOffers(LoopHook):
    """The offers hook: requests whose sources are all the MTP head's report nothing."""

    def __init__(
        self,
        scheduler: Callable[[], SchedulerProtocol],
        live: Callable[[], Live],
        proposals: Proposals,
    ) -> None:
        self.scheduler = scheduler
        self.live = live
        self.proposals = proposals

    def on_frame(self, plan: ScheduledPlan, result: FrameResult) -> None:
        live, scheduler = self.live(), self.scheduler()
        for lane in plan.lanes:
            request = live.get(lane.handle)
            if request is None or request.is_done:
                continue
            sampling = request.request.sampling
            sources = self.proposals.sources_for(
                sampling.speculative_method, sampling.grammar is not None
            )
            if len(sources) == 1 and not sources[0].host_drafts:
                continue
            view = scheduler.request(lane.handle)
            if view is None or not view.is_live:  # finished ones may be released already
                continue
            if len(sources) > 1:
                scheduler.offer_drafts(lane.handle, {s.source: s.offer(request) for s in sources})
            else:
                scheduler.limit_drafts(lane.handle, sources[0].offer(request))
