"""Several prompts in one program: which prompts share a prompt bucket, and how many
tokens each takes (issue 39)."""

from __future__ import annotations

from collections.abc import Sequence

from ignition.helios.decide.utility import LanePick, LaneView, prompt_lane

# One scored row: (utility.lane_order_key at the lane capacity, tokens it consumes, view)
Scored = tuple[tuple, int, LaneView]


def fill_rows(scored: Sequence[Scored], max_rows: int, token_budget: int) -> list[LanePick]:
    """Rows of one packed prompt workspace: ``scored`` best first, each taken whole while
    at most ``max_rows`` rows and ``token_budget`` tokens are used (a row that does not fit
    is passed over for a shorter one behind it)."""
    chosen, used = [], 0
    for _, tokens, view in scored:
        if len(chosen) == max_rows:
            break
        if used + tokens <= token_budget:
            chosen.append(prompt_lane(view, tokens))
            used += tokens
    return chosen


def pack_lanes(scored: Sequence[Scored], lanes: int) -> list[LanePick]:
    """The first ``lanes`` rows of ``scored`` (every eligible row, scored at the lane
    capacity and sorted by key, best first), each taking the tokens it was scored at."""
    return [prompt_lane(view, tokens) for _, tokens, view in scored[:lanes]]


def lane_value_bound(scored: Sequence[Scored], lanes: int) -> float:
    """The lanes' value, as an upper bound: the L best rows' positive values."""
    return sum(max(0.0, -key[0]) for key, _, _ in scored[:lanes])
