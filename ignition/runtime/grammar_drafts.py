"""Drafts for grammar-constrained requests, and the count Helios plans them by.

A constrained row speculates only with drafts the host knows before launch, so that the
host can write the grammar mask of every verification position (runtime/grammar.py,
model.speculative). Its proposal is the tokens its grammar forces next (the JSON keys and
punctuation of a schema); with ``COPY_WHEN_UNFORCED``, where nothing is forced, a copy of
earlier context (runtime.copy_proposals) whose grammar-valid prefix the binding keeps.

Helios plans a request's rows by RequestSpec.max_drafts; :class:`GrammarDraftLimits`
reports each constrained request's proposal length after every frame that served it
(``limit_drafts``). Such frames need completion feedback (RequestSpec.grammar), so the
next plan always reads the count after the last frame's tokens.
"""

from __future__ import annotations

from collections.abc import Callable

from ignition.helios import ScheduledPlan, SchedulerProtocol
from ignition.runtime.copy_proposals import copy_proposal
from ignition.runtime.grammar import MAX_PROPOSAL
from ignition.runtime.loop.hooks import Live, LoopHook
from ignition.runtime.requests.table import LiveRequest

# Copy proposals for a constrained row where its grammar forces nothing. Off: every
# round of a constrained request is priced as the "grammar" source (near-certain forced
# drafts), and copies mixed into that one source would misprice both; choosing per round
# between forced drafts and copies, as "both" does for the head's drafts, is not built.
COPY_WHEN_UNFORCED = False


def proposal(live: LiveRequest, max_drafts: int = MAX_PROPOSAL) -> tuple[int, ...]:
    """A constrained request's drafts for its next round, at most ``max_drafts``; the
    matcher must have accepted every output token (completion feedback)."""
    grammar = live.grammar
    if grammar is None or max_drafts <= 0:
        return ()
    forced = grammar.forced_drafts()  # type: ignore[attr-defined]
    if forced or not COPY_WHEN_UNFORCED:
        return forced[:max_drafts]
    return copy_proposal([*live.prompt_ids, *live.output_ids], max_drafts)


class GrammarDraftLimits(LoopHook):
    """Tells Helios, after each completed frame, how many drafts each constrained request
    it served can verify next: its proposal's length."""

    def __init__(self, scheduler: Callable[[], SchedulerProtocol]) -> None:
        self.scheduler = scheduler

    def after_frame(self, plan: ScheduledPlan, live: Live, device_ns: int, ok: bool) -> None:
        if not ok:
            return
        scheduler = self.scheduler()
        for lane in plan.lanes:
            request = live.get(lane.handle)
            if request is None or request.grammar is None or request.is_done:
                continue
            view = scheduler.request(lane.handle)
            if view is not None and view.is_live:  # finished ones may be released already
                scheduler.limit_drafts(lane.handle, len(proposal(request)))
