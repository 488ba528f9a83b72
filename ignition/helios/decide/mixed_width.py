"""Mixed frames at the width their decoders are worth (``PolicyConfig.mixed_width``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios.decide.utility import Candidate
from ignition.helios.plans import LaneRole

GENERATION = (GraphKind.DECODE, GraphKind.SPECULATIVE)
Evaluate = Callable[[Descriptor, bool], list[Candidate]]
TOLERANCE = 1e-9  # relative; a sibling must earn more than this to displace the winner


def prompt_work(c: Candidate) -> tuple:
    """The prompt rows a candidate carries: (slot, tokens) per prompt lane."""
    return tuple(
        sorted(
            (lane.view.slot, lane.num_prompt_tokens)
            for lane in c.lanes
            if lane.role is LaneRole.PROMPT
        )
    )


def siblings(
    d: Descriptor, shapes: Sequence[tuple[Descriptor, bool]]
) -> list[tuple[Descriptor, bool]]:
    """The active mixed programs of ``d``'s batch, prompt capacity and lanes at another width."""
    return [
        (s, flag)
        for s, flag in shapes
        if s.kind is GraphKind.MIXED
        and s is not d
        and s.speculation_enabled == d.speculation_enabled
        and s.batch_capacity == d.batch_capacity
        and s.prefill_capacity == d.prefill_capacity
        and s.prompt_lanes == d.prompt_lanes
        and s.token_capacity != d.token_capacity
    ]


def generation_rate(shapes: Sequence[tuple[Descriptor, bool]], evaluate: Evaluate) -> float:
    """The best determinate, unrejected score of a generation frame (-inf: none)."""
    best = -math.inf
    for s, flag in shapes:
        if s.kind in GENERATION:
            for c in evaluate(s, flag):
                if not c.is_indeterminate and math.isfinite(c.score):
                    best = max(best, c.score)
    return best


def widen(
    winner: Candidate | None,
    shapes: Sequence[tuple[Descriptor, bool]],
    evaluate: Evaluate,
    page_shortfall: Callable[[Candidate], int],
) -> Candidate | None:
    """``winner``, or its sibling with the highest value net of the generation rate
    (among those the free KV pages cover as well as the winner's)."""
    if winner is None or winner.is_indeterminate:
        return winner
    d = winner.descriptor
    if d.kind is not GraphKind.MIXED or not d.speculation_enabled:
        return winner
    work = prompt_work(winner)
    others = siblings(d, shapes)
    if not work or not others:
        return winner
    rate = generation_rate(shapes, evaluate)
    if not math.isfinite(rate):
        return winner

    def net(c: Candidate) -> float:
        return (c.score - rate) * c.duration_ms

    best, best_net = winner, net(winner)
    pages = max(0, page_shortfall(winner))
    for s, flag in others:
        for c in evaluate(s, flag):
            if c.is_indeterminate or not math.isfinite(c.score) or prompt_work(c) != work:
                continue
            gain = net(c)
            margin = TOLERANCE * max(1.0, abs(best_net))
            if gain > best_net + margin and page_shortfall(c) <= pages:
                best, best_net = c, gain
    return best
