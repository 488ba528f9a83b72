"""Mixed frames at the width their decoders are worth (``PolicyConfig.mixed_width``).

A mixed frame's value is mostly its prompt chunk's: a 1,024-token chunk beside eight
decoders is worth about 70 prompt-value units against the decoders' 5, so ranking by
value per ms prefers the narrowest mixed program even where its decoders' extra rows
would earn more per ms than any generation frame (at c = 8, 4x H100: widening the
1,024-token frame from width one to two adds 5 ms for 2.8 units, 0.56 per ms, against
the best generation frame's 0.38). The frame's rank is the right question for *whether*
it runs; its width only moves decoder tokens between this frame and the next.

With the rule on, once the selection's winner is a determinate speculative mixed frame
carrying prompt rows, its siblings (the mixed programs of the same batch, prompt
capacity and lanes at another verification width) are evaluated, and the one carrying
the same prompt rows with the highest scored value net of the generation rate,

    score x T - r_gen x T,

runs in its place; r_gen is the best score of a generation frame (decode or speculative
program) in the same decision (with none determinate and unrejected, as while a prompt
run rejects frames carrying no prompt, the winner stands). A sibling's extra ms thus
pays only where its decoders' rows earn more than the device would earn serving them in
a generation frame; a rejected sibling (the TBT target) never runs. Off (the seed's
rule), the narrowest winner stands. Measured in ``docs/scheduling.md`` ("Mixed frames
at the generation rate").
"""

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
