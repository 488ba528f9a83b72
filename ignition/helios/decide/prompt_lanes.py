"""Several prompts in one program: which prompts share a prompt bucket, and how many
tokens each takes (issue 39).

A prefill or mixed program with L > 1 prompt lanes (``Descriptor.prompt_lanes``) lets up
to L prompts' chunks share its one prompt bucket of P tokens. The program's duration
does not depend on which prompts fill it, so for a fixed program value per time is
the lanes' total value, and the choice is a packing: a row taking t of its r remaining
tokens earns p t, plus its first output token and delivery b when t = r.

**Rule.**

1. *The lead lane is the seed's prompt row*: the row a single-lane program of the same
   bucket would carry (highest value at the bucket, then least recently served, then
   lowest slot; ``utility.lane_order_key``). Every multi-lane candidate carries it, so a
   multi-lane program serves whoever a single-lane one would: a prompt whose fairness
   price has grown is never pushed out of a frame by a wave of newer ones (the lane
   fairness of the seed's prompt rows).
2. *The other lanes fill the bucket*, each row taking what it can consume of the tokens
   left (``utility.consumable_tokens``: prompt end, whole image spans, capture cuts), in
   the better (by total value) of two orders; ties go to the first:

   - *fairness*: the lead takes all it can, then the rows in the seed's order;
   - *finishing first*: rows the bucket can finish whole, best value per token first
     (the first output token and delivery are worth about 64 prompt tokens, so short
     remainders lead), then the lead takes what is left, then the rest in the seed's
     order. A long lead then yields bucket tokens it would have spent on a chunk of
     its middle to prompts that finish now, and keeps its own lane.

   Only rows of positive value take part beyond the lead (prices are non-negative, so
   every row with tokens does).

With L = 1 the rule is the seed's single prompt row, unchanged. The two orders are a
bounded search, not an exact knapsack over every subset (like the seed's three
orderings of adaptive ragged cohorts); they are exact when the rows' prices are equal,
the common case of a wave of new prompts (the newcomer start depends only on the
prompt's length, ``prompt_starts.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ignition.helios.decide.utility import LanePick, LaneView, consumable_tokens, prompt_lane

# One scored row: (utility.lane_order_key at the bucket, tokens it consumes there, view)
Scored = tuple[tuple, int, LaneView]


def pack_lanes(scored: Sequence[Scored], lanes: int, budget: int) -> list[LanePick]:
    """Up to ``lanes`` prompt rows sharing ``budget`` tokens; ``scored`` is every eligible
    row sorted by its key at the bucket (best first). The lead (``scored[0]``) is always
    among them; the list is in the order the rows were chosen."""
    if not scored or lanes <= 0 or budget <= 0:
        return []
    _, lead_tokens, lead = scored[0]
    fair = _fill([prompt_lane(lead, lead_tokens)], scored[1:], lanes, budget - lead_tokens)
    if lanes == 1:
        return fair
    finishing = _finishing_first(scored, lanes, budget)
    if finishing is not None and _value(finishing) > _value(fair):
        return finishing
    return fair


def _fill(chosen: list[LanePick], order: Sequence[Scored], lanes: int, left: int) -> list[LanePick]:
    """``chosen`` extended by the rows of ``order``, each taking what it can of ``left``."""
    for _, _, view in order:
        if len(chosen) >= lanes or left <= 0:
            break
        tokens = consumable_tokens(view, left)
        if tokens > 0:
            chosen.append(prompt_lane(view, tokens))
            left -= tokens
    return chosen


def _finishing_first(scored: Sequence[Scored], lanes: int, budget: int) -> list[LanePick] | None:
    """The second order: whole remainders first (best value per token), keeping one lane
    and at least one token for the lead; None when it has nothing to add."""
    lead = scored[0][2]
    whole = [
        entry
        for entry in scored[1:]
        if entry[1] >= entry[2].remaining_prompt and entry[1] > 0
    ]
    if not whole:
        return None
    # value per token at the whole remainder, then the seed's order (keys are unique)
    whole.sort(key=lambda e: (e[0][0] / e[1], e[0]))
    chosen: list[LanePick] = []
    left = budget - 1  # the lead keeps a token
    for _, tokens, view in whole:
        if len(chosen) >= lanes - 1 or left <= 0:
            break
        if tokens <= left and consumable_tokens(view, left) >= tokens:
            chosen.append(prompt_lane(view, tokens))
            left -= tokens
    if not chosen:
        return None
    left += 1
    lead_tokens = consumable_tokens(lead, left)
    if lead_tokens <= 0:
        return None
    chosen.insert(0, prompt_lane(lead, lead_tokens))
    taken = {id(p.view) for p in chosen}
    rest = [entry for entry in scored[1:] if id(entry[2]) not in taken]
    return _fill(chosen, rest, lanes, left - lead_tokens)


def _value(picks: Sequence[LanePick]) -> float:
    return sum(p.value for p in picks)
