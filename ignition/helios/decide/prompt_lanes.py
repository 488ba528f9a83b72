"""Several prompts in one program: which prompts share a prompt bucket, and how many
tokens each takes (issue 39).

A prefill or mixed program with L > 1 prompt lanes (``Descriptor.prompt_lanes``) splits
its bucket of P tokens into L rows of ``lane_capacity`` = P / L (the lane-major
workspace of ``ignition.model.packing``): a lane carries one prompt's chunk of at most
P / L tokens. The program's duration does not depend on which prompts fill it, so for
a fixed program value per time is the lanes' total value.

**Rule.** The program carries the L best prompt rows at its lane capacity, each taking
what it can consume of P / L tokens (``utility.consumable_tokens``: prompt end, whole
image spans, capture cuts), in the seed's prompt-row order (``utility.lane_order_key``:
highest value at that capacity, then least recently served, then lowest slot).

- *Exact for the program.* A row's value at the lane capacity does not depend on the
  other lanes (the L lanes' chunks never exceed the bucket together), so the L best
  values are the most a fixed program can earn; which program (P, L) and so how many
  tokens each prompt takes is the selection's: value per time over every prepared
  program, one-lane ones included (a lone long prompt takes a one-lane program's whole
  bucket; several short ones share a multi-lane one).
- *Fair.* The first lane is the row a one-lane program of P / L tokens would carry, and
  rows of equal value go least recently served first, so a wave of new prompts rotates
  through the lanes and no prompt waits behind a wave it out-ranks; a prompt left out
  keeps its growing fairness price (``scheduling-utility.md``).
- With L = 1 it is the seed's single prompt row, unchanged.
"""

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
