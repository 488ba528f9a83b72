"""Which proposal source fills a request's next round, where Helios chooses per round."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ignition.helios.state.acceptance import AcceptanceTracker
from ignition.helios.types import DraftSource


def usable_offers(
    offers: Mapping[DraftSource, int | None], order: Sequence[DraftSource], max_depth: int
) -> dict[DraftSource, int]:
    """Drafts each source can fill in a round (None: as deep as the programs hold),
    bounded by ``max_depth``; sources that offer none are left out, in ``order``."""
    usable: dict[DraftSource, int] = {}
    for source in order:
        offered = offers.get(source, 0)
        drafts = max_depth if offered is None else min(offered, max_depth)
        if drafts > 0:
            usable[source] = drafts
    return usable


def choose_source(
    acceptance: AcceptanceTracker,
    offers: Mapping[DraftSource, int | None],
    order: Sequence[DraftSource],
    max_depth: int,
    alpha: float,
) -> DraftSource:
    """The source of the request's next round: the largest optimistic expected output
    at the widest width every offering source can fill; ``order[0]`` when none offers a
    draft (the round verifies none, whichever source is named)."""
    usable = usable_offers(offers, order, max_depth)
    if not usable:
        return order[0]
    width = min(usable.values())  # drafts; the round's query length is width + 1
    best, best_value = order[0], -1.0
    for source in usable:
        value = acceptance.history(source).optimistic_outputs(width, alpha)[width + 1]
        if value > best_value:
            best, best_value = source, value
    return best
