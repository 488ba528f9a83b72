"""Copy proposals (prompt lookup) for requests whose speculative method is "ngram" or
"both", and the proposal sources Helios is told of.

Each decoding row of such a request verifies, as its supplied drafts, the continuation of
its latest suffix found earlier in its prompt and output (runtime.copy_proposals: a
bounded n-gram match over a bounded window, so the host's work per row and frame is
bounded). The drafts follow every token before them, so each round program serving the
request needs completion feedback (RequestSpec.host_drafts; its frames without drafts
pipeline as others'). After each frame :class:`CopyDraftLimits` reports the
proposal's length: as the draft limit of an "ngram" request (``limit_drafts``: a row
without a match verifies none, priced by the copy source's acceptance), or as an offer
beside the MTP head's drafts for a "both" request (``offer_drafts``: Helios picks the
round's source, and the binding stages the copy only for lanes it gave the copy).
Verification is coupled with q one-hot (model.proposals), so the output is the same
whichever drafts a round verifies.
"""

from __future__ import annotations

from collections.abc import Callable

from ignition.helios import ScheduledPlan, SchedulerProtocol
from ignition.runtime.copy_proposals import PromptLookup, copy_proposal
from ignition.runtime.executors.frames import FrameResult
from ignition.runtime.grammar import MAX_PROPOSAL
from ignition.runtime.loop.hooks import Live, LoopHook
from ignition.runtime.requests.request import SamplingParams
from ignition.runtime.requests.table import LiveRequest

COPY_SOURCE = "ngram"
LEARNED_SOURCE = "mtp"
GRAMMAR_SOURCE = "grammar"
CHOICES = (LEARNED_SOURCE, COPY_SOURCE)  # "both": in this order, so ties go to the head


def proposal_source(sampling: SamplingParams) -> str:
    """Where a request's first round's drafts come from: Helios's
    RequestSpec.proposal_source. A constrained request verifies its grammar's forced
    drafts ("grammar": near-certain, so priced and learned apart from the head's), a
    copying one copies ("ngram"); "both" starts with the head's ("mtp") and Helios
    chooses every later round's."""
    if sampling.grammar is not None:
        return GRAMMAR_SOURCE
    return COPY_SOURCE if sampling.copies_drafts and not sampling.chooses_drafts else LEARNED_SOURCE


def proposal_choices(sampling: SamplingParams) -> tuple[str, ...]:
    """Helios's RequestSpec.proposal_choices: both sources for "both", else none."""
    return CHOICES if sampling.chooses_drafts else ()


def copy_drafts(
    live: LiveRequest, lookup: PromptLookup, max_drafts: int = MAX_PROPOSAL
) -> tuple[int, ...]:
    """The request's copy proposal for its next round, at most ``max_drafts`` tokens; one
    search per output length (the limit and the frame's drafts read the same one, under
    the server's one ``lookup``)."""
    if max_drafts <= 0:
        return ()
    num_output = len(live.output_ids)
    cached = live.copy_drafts
    if cached is None or cached[0] != num_output:
        window = lookup.window
        context = live.request.prompt_ids[-window:] + tuple(live.output_ids[-window:])
        found = copy_proposal(context, MAX_PROPOSAL, lookup.max_ngram, lookup.min_ngram, window)
        cached = live.copy_drafts = (num_output, found)
    return cached[1][:max_drafts]


class CopyDraftLimits(LoopHook):
    """Tells Helios, after each frame published its tokens, how many drafts each copying
    request it served can verify next: its copy proposal's length (0: no match). A
    request that lets Helios choose ("both") is offered the copy beside the head's drafts,
    and Helios picks the next round's source (Scheduler.offer_drafts)."""

    def __init__(
        self,
        scheduler: Callable[[], SchedulerProtocol],
        live: Callable[[], Live],
        lookup: PromptLookup,
    ) -> None:
        self.scheduler = scheduler
        self.live = live
        self.lookup = lookup

    def on_frame(self, plan: ScheduledPlan, result: FrameResult) -> None:
        live, scheduler = self.live(), self.scheduler()
        for lane in plan.lanes:
            request = live.get(lane.handle)
            if request is None or request.is_done or not request.request.sampling.copies_drafts:
                continue
            view = scheduler.request(lane.handle)
            if view is None or not view.is_live:  # finished ones may be released already
                continue
            copied = len(copy_drafts(request, self.lookup))
            if request.request.sampling.chooses_drafts:
                scheduler.offer_drafts(lane.handle, {LEARNED_SOURCE: None, COPY_SOURCE: copied})
            else:
                scheduler.limit_drafts(lane.handle, copied)
