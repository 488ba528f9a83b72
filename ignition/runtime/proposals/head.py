"""The MTP head's learned drafts: proposed inside the round program from the model's own
hidden state, so the host binds nothing and finds nothing between frames."""

from __future__ import annotations

from dataclasses import dataclass

from ignition.helios import HEAD_DRAFTS, DraftSource
from ignition.runtime.proposals.source import DraftRow


@dataclass(frozen=True)
class HeadDrafts:
    """A request's default source: as deep as the programs hold, no completion feedback."""

    source: DraftSource = HEAD_DRAFTS
    host_drafts: bool = False

    def draft_limit(self) -> int | None:
        return None

    def offer(self, row: DraftRow) -> int | None:
        return None

    def drafts(self, row: DraftRow, max_drafts: int) -> tuple[int, ...] | None:
        return None
