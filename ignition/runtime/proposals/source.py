"""What a proposal source is: something that offers drafts for a request's rows.

The MTP head (proposals/head.py), prompt lookup (proposals/copy_drafts.py) and a grammar's
forced tokens (proposals/grammar_drafts.py) are the built-in ones; proposals/registry.py
names them for requests. A source answers four questions, each at one place of the loop:
admission asks its draft limit and whether its drafts need completion feedback
(RequestSpec.max_drafts, .host_drafts), the offers hook asks what it can fill after each
frame (loop/proposal_hooks.py), and the binding asks for the drafts a round verifies
(executors/binding.py). Verification is coupled with q one-hot (model.proposals), so a
source changes how many drafts survive, never the output.
"""

from __future__ import annotations

from typing import Protocol

from ignition.helios import DraftSource

# The most drafts one proposal holds (more than any program's proposal depth D).
MAX_PROPOSAL = 16


class PromptHolder(Protocol):
    @property
    def prompt_ids(self) -> tuple[int, ...]: ...


class DraftRow(Protocol):
    """What a source reads of a live request (runtime.request_table.LiveRequest)."""

    @property
    def request(self) -> PromptHolder: ...  # the prompt as the client sent it

    @property
    def prompt_ids(self) -> tuple[int, ...]: ...  # the prompt and any replayed output

    output_ids: list[int]
    grammar: object | None  # the grammar matcher of a constrained request
    # A source's memo of its last search for this request, by source: the offer Helios
    # reads and the frame's drafts are then one search.
    proposal_memo: dict[DraftSource, object]


class ProposalSource(Protocol):
    """A source of drafts for a request's rows."""

    # Helios's name for it: acceptance is learned and rounds are priced per source.
    source: DraftSource
    # Its drafts are found on the host from every token before them: each round program
    # serving it waits for the previous frame's tokens (RequestSpec.host_drafts), and it
    # reports what it can fill after every frame.
    host_drafts: bool

    def draft_limit(self) -> int | None:
        """RequestSpec.max_drafts at admission (None: as deep as the programs hold)."""
        ...

    def offer(self, row: DraftRow) -> int | None:
        """The drafts it can fill in the row's next round, after a frame published its
        tokens (None: as deep as the programs hold)."""
        ...

    def drafts(self, row: DraftRow, max_drafts: int) -> tuple[int, ...] | None:
        """The drafts the row's round verifies, at most ``max_drafts``; None: the program
        proposes its own (the MTP head), nothing is bound."""
        ...
