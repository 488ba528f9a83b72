"""Copy drafts (prompt lookup): the proposal source of requests whose speculative method is
"ngram" or "both".

Each decoding row of such a request verifies, as its supplied drafts, the continuation of
its latest suffix found earlier in its prompt and output (proposals/copy_proposals.py: a
bounded n-gram match over a bounded window, so the host's work per row and frame is
bounded). The drafts follow every token before them, so each round program serving the
request needs completion feedback (its frames without drafts pipeline as others'). After
each frame the offers hook reports the proposal's length: as the draft limit of an "ngram"
request (a row without a match verifies none, priced by the copy source's acceptance), or
beside the MTP head's drafts for a "both" request (Helios picks the round's source, and
the binding stages the copy only for lanes it gave the copy).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ignition.helios import DraftSource
from ignition.runtime.proposals.copy_proposals import PromptLookup, copy_proposal
from ignition.runtime.proposals.source import MAX_PROPOSAL, DraftRow

COPIES = DraftSource("ngram")


@dataclass(frozen=True)
class CopyDrafts:
    """Prompt lookup under the server's one search (``lookup``)."""

    lookup: PromptLookup = field(default_factory=PromptLookup)
    source: DraftSource = COPIES
    host_drafts: bool = True

    def draft_limit(self) -> int | None:
        return 0  # none before its first frame's tokens

    def offer(self, row: DraftRow) -> int | None:
        return len(self.drafts(row, MAX_PROPOSAL))

    def drafts(self, row: DraftRow, max_drafts: int) -> tuple[int, ...]:
        """The row's copy proposal for its next round, at most ``max_drafts`` tokens; one
        search per output length (the offer and the frame's drafts read the same one)."""
        if max_drafts <= 0:
            return ()
        num_output = len(row.output_ids)
        cached = row.proposal_memo.get(self.source)
        if cached is None or cached[0] != num_output:  # type: ignore[index]
            lookup = self.lookup
            window = lookup.window
            context = row.request.prompt_ids[-window:] + tuple(row.output_ids[-window:])
            found = copy_proposal(
                context, MAX_PROPOSAL, lookup.max_ngram, lookup.min_ngram, window
            )
            cached = row.proposal_memo[self.source] = (num_output, found)
        return cached[1][:max_drafts]  # type: ignore[index]
