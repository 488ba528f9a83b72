"""Prompt chunks sized at serve time to the decoders' TBT target.

A frame carrying a prompt row drains the transport window (scheduling-runtime-design.md,
"Planning and the execution queue"), so a ready decoder waits through it: the gap
between two of its deliveries is at most the generation frame it was last served in
plus this frame. With ``PolicyConfig.tbt_target_ms`` = tau > 0 and R ready decoders, a
prompt-carrying candidate of measured duration T is eligible only if

    G(R) + T <= tau

G(R) being the fastest measured generation program holding the R decoders (0 when none
is measured). So the chunk chosen is the largest one whose frame, with the decoders
riding along, keeps their gap within the target; the catalog's and ``--max-prefill-chunk``'s
capacities stay the upper bound. A candidate failing it scores minus infinity (the rule
only lowers scores, so every bound of the bounded search stays true). Left as they are:
frames with no ready decoder, unknown durations (discovery), and the smallest prompt
capacity of the catalog (a prompt must make progress when no chunk fits).
Measured in ``docs/scheduling.md`` ("Chunks sized to the TBT target").
"""

from __future__ import annotations

from collections.abc import Sequence

from ignition.components.catalog import Descriptor
from ignition.helios.decide.cost import CostModel
from ignition.helios.decide.left_out import CarryTimes
from ignition.helios.decide.utility import Candidate, Decision, prompt_capacity

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


def within_target(
    candidate: Candidate,
    capacity: int,
    ready_decoders: int,
    times: CarryTimes,
    smallest: int,
    decision: Decision,
) -> bool:
    """Whether a candidate carrying a prompt row of prompt ``capacity`` keeps the ready
    decoders' gap within ``decision.tbt_target_ms``."""
    tau = decision.tbt_target_ms
    if tau <= 0 or ready_decoders <= 0 or candidate.is_indeterminate or capacity <= smallest:
        return True
    generation = times.generation_ms(ready_decoders) or 0.0
    return generation + candidate.duration_ms <= tau
