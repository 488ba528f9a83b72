"""Grammar-forced drafts: the proposal source of every grammar-constrained request.

A constrained row speculates only with drafts the host knows before launch, so that the
host can write the grammar mask of every verification position (runtime/grammar.py,
model.speculative). Its proposal is the tokens its grammar forces next (the JSON keys and
punctuation of a schema); with ``COPY_WHEN_UNFORCED``, where nothing is forced, a copy of
earlier context (proposals/copy_proposals.py) whose grammar-valid prefix the binding keeps.
Its frames need completion feedback anyway (RequestSpec.grammar), so the next plan always
reads the count the offers hook reported after the last frame's tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from ignition.helios import DraftSource
from ignition.runtime.proposals.copy_proposals import copy_proposal
from ignition.runtime.proposals.source import MAX_PROPOSAL, DraftRow

GRAMMAR_DRAFTS = DraftSource("grammar")
# Copy proposals for a constrained row where its grammar forces nothing. Off: every
# round of a constrained request is priced as the "grammar" source (near-certain forced
# drafts), and copies mixed into that one source would misprice both; choosing per round
# between forced drafts and copies, as "both" does for the head's drafts, is not built.
COPY_WHEN_UNFORCED = False


def proposal(row: DraftRow, max_drafts: int = MAX_PROPOSAL) -> tuple[int, ...]:
    """A constrained request's drafts for its next round, at most ``max_drafts``; the
    matcher must have accepted every output token (completion feedback)."""
    grammar = row.grammar
    if grammar is None or max_drafts <= 0:
        return ()
    forced = grammar.forced_drafts()  # type: ignore[attr-defined]
    if forced or not COPY_WHEN_UNFORCED:
        return forced[:max_drafts]
    return copy_proposal([*row.prompt_ids, *row.output_ids], max_drafts)


@dataclass(frozen=True)
class GrammarDrafts:
    """A constrained request's source whatever its speculative method says (the head's
    drafts, proposed out of the matcher's reach, are never verified for it)."""

    source: DraftSource = GRAMMAR_DRAFTS
    host_drafts: bool = True

    def draft_limit(self) -> int | None:
        return 0  # none before its first token

    def offer(self, row: DraftRow) -> int | None:
        return len(proposal(row))

    def drafts(self, row: DraftRow, max_drafts: int) -> tuple[int, ...]:
        return proposal(row, max_drafts)
