"""Frames sized at serve time to the decoders' TBT target: prompt chunks, speculation."""

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


def speculation_within_target(candidate: Candidate, decision: Decision) -> bool:
    """Whether a speculative frame carrying no prompt keeps its decoders' gap within
    ``decision.tbt_target_ms``: its estimate is at most the target (width one at the same
    batch is the cheaper way to serve them; a frame of unknown cost is not judged)."""
    tau = decision.tbt_target_ms
    if not decision.speculation_within_target or tau <= 0 or candidate.is_indeterminate:
        return True
    if candidate.descriptor.proposal_depth <= 0:
        return True
    return candidate.duration_ms <= tau
