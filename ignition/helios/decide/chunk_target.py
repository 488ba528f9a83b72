"""Prompt chunks sized at serve time to the decoders' TBT target.

A frame carrying a prompt row drains the transport window (scheduling-runtime-design.md,
"Planning and the execution queue"), so a ready decoder waits through it: its next
delivery comes at the frame's end, A_i + T after its last one (A_i its output age at the
frame's projected start, T the frame's measured duration), and a decoder the frame
leaves out waits through the generation frame it then needs too. With
``PolicyConfig.tbt_target_ms`` = tau > 0, a prompt-carrying candidate serving n of the R
ready decoders is eligible only if

    max_i A_i + T + F(R - n) <= tau

F(E) being the fastest measured generation program holding the E decoders left out (0
when it carries them all, or none is measured). So the chunk chosen is the largest one
whose frame, with the decoders riding along, keeps the oldest one's gap within the
target, and a frame leaving decoders out to be shorter gains nothing; right after the
decoders were served a large chunk fits, while they age it does not. The catalog's and
``--max-prefill-chunk``'s capacities stay the upper bound. A candidate failing it scores
minus infinity (the rule only lowers scores, so every bound of the bounded search stays
true). Left as they are: frames with no ready decoder, unknown durations (discovery),
and the smallest prompt capacity of the catalog (a prompt must make progress when no
chunk fits). Measured in ``docs/scheduling.md`` ("Chunks sized to the TBT target").
"""

from __future__ import annotations

from collections.abc import Sequence

from ignition.components.descriptor import Descriptor
from ignition.helios.decide.left_out import CarryTimes
from ignition.helios.decide.rounds import LaneTable
from ignition.helios.decide.utility import Candidate, Decision, prompt_capacity
from ignition.helios.state.cost import CostModel

REJECTED = float("-inf")


def smallest_prompt_capacity(descriptors: Sequence[Descriptor], costs: CostModel) -> int:
    """The smallest prompt capacity of the catalog (memoised on the catalog object)."""
    key = id(descriptors)
    cached = costs.derived.get("smallest_prompt")
    if cached is not None and cached[0] == key and cached[1][0] is descriptors:
        return cached[1][1]
    found = min((c for c in map(prompt_capacity, descriptors) if c > 0), default=0)
    costs.derived["smallest_prompt"] = (key, (descriptors, found))
    return found


def ready_ages(table: LaneTable) -> tuple[int, float]:
    """(R, max A_i) over the ready decoders (those with output left), once per table."""
    found = table.__dict__.get("_ready_ages")
    if found is None:
        ages = [v.age_ms for v in table.views if v.remaining_output >= 1]
        found = (len(ages), max(ages, default=0.0))
        table.__dict__["_ready_ages"] = found
    return found


def within_target(
    candidate: Candidate,
    capacity: int,
    table: LaneTable,
    served: int,
    times: CarryTimes,
    smallest: int,
    decision: Decision,
) -> bool:
    """Whether a candidate carrying a prompt row of prompt ``capacity`` and ``served``
    of the ready decoders keeps their gap within ``decision.tbt_target_ms``."""
    tau = decision.tbt_target_ms
    if tau <= 0 or candidate.is_indeterminate or capacity <= smallest:
        return True
    ready, oldest = ready_ages(table)
    if ready <= 0:
        return True
    left = ready - min(served, ready)
    after = (times.generation_ms(left) or 0.0) if left > 0 else 0.0
    return oldest + candidate.duration_ms + after <= tau
