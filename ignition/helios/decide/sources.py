"""Which proposal source fills a request's next round, where Helios chooses per round.

A request may let Helios choose, round by round, between proposal sources (the MTP
head's learned drafts and copies of its own context, issue 28's "both"): after each
frame the runtime offers what every source can supply for the next round (a copy
proposal's length; the learned head drafts as deep as the programs hold), and
:func:`choose_source` picks the round's source. The selection then prices the request's
rows by that source's acceptance like any other row (``RequestSpec.proposal_source``).

Why the rule compares expected outputs at one width: both sources fill the same prepared
programs (a supplied prefix replaces the head's drafts, model.proposals), so a round of
a given width costs the same whichever source fills it, and value per time orders the
sources as their expected outputs at that width do. The width compared is the widest
both can fill (the shortest offer, bounded by the catalog's depth); a source that could
go wider is not credited for it (a learned round wider than a short copy is a different
shape, whose time the selection would weigh). Each source's estimate is its bounded
optimistic one (the bound funded acceptance learning uses, speculation.py), so a source
that has been tried little is tried again, and one that keeps failing stops being
chosen as its weight grows; ties go to the first source the request lists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ignition.helios.state.acceptance import AcceptanceTracker


def usable_offers(
    offers: Mapping[str, int | None], order: Sequence[str], max_depth: int
) -> dict[str, int]:
    """Drafts each source can fill in a round (None: as deep as the programs hold),
    bounded by ``max_depth``; sources that offer none are left out, in ``order``."""
    usable: dict[str, int] = {}
    for source in order:
        offered = offers.get(source, 0)
        drafts = max_depth if offered is None else min(offered, max_depth)
        if drafts > 0:
            usable[source] = drafts
    return usable


def choose_source(
    acceptance: AcceptanceTracker,
    offers: Mapping[str, int | None],
    order: Sequence[str],
    max_depth: int,
    alpha: float,
) -> str:
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
