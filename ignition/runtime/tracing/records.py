"""What a frame, a lane and a wait look like to the trace, from the engine or the simulator."""

from __future__ import annotations

from dataclasses import dataclass

from ignition.components.descriptor import Descriptor
from ignition.helios import LaneRole, ScheduledPlan


@dataclass(slots=True)
class LaneRecord:
    """One lane of a completed frame: its request, drafts offered and accepted."""

    request: str
    role: str
    num_prompt_tokens: int
    query_length: int
    num_tokens: int
    num_offered: int = 0
    num_accepted: int = 0

    @property
    def width_class(self) -> str:
        """The dashboard's request class of this lane."""
        if self.role == LaneRole.PROMPT:
            return "prefill"
        if self.role != LaneRole.DECODE:
            return str(self.role)
        return "speculative" if self.num_offered > 0 else "decode"


@dataclass(slots=True)
class FrameRecord:
    """One completed frame on the device: when it ran, what Helios predicted, its shape and why."""

    fence: int
    start_ns: int
    duration_ns: int
    predicted_ns: int
    program: str
    kind: str
    batch: int
    depth: int
    tokens: int
    prefill: int
    reason: str
    execution_class: str
    value_rate: float
    log_scale: float
    lanes: tuple[LaneRecord, ...]


_NAMES: dict[int, tuple[Descriptor, str]] = {}


def program_name(d: Descriptor) -> str:
    """``d.name``, built once per descriptor."""
    known = _NAMES.get(id(d))
    if known is None or known[0] is not d:
        known = _NAMES[id(d)] = (d, d.name)
    return known[1]


def frame_record(
    plan: ScheduledPlan,
    fence: int,
    start_ns: int,
    duration_ns: int,
    requests: list[str],
    num_tokens: list[int],
    num_offered: list[int],
) -> FrameRecord:
    """The record of ``plan`` run at ``start_ns`` for ``duration_ns``, lanes in plan order."""
    # Enum members stand for their values (StrEnum: JSON writes them so).
    lanes = tuple(
        LaneRecord(
            request=requests[i],
            role=lane.role,
            num_prompt_tokens=lane.num_prompt_tokens,
            query_length=lane.query_length,
            num_tokens=num_tokens[i],
            num_offered=num_offered[i],
            num_accepted=max(0, min(num_offered[i], num_tokens[i] - 1)) if num_offered[i] else 0,
        )
        for i, lane in enumerate(plan.lanes)
    )
    d = plan.descriptor
    return FrameRecord(
        fence=fence,
        start_ns=start_ns,
        duration_ns=duration_ns,
        predicted_ns=plan.estimated_duration_ns,
        program=program_name(d),
        kind=d.kind,
        batch=d.batch_capacity,
        depth=d.proposal_depth,
        tokens=d.token_capacity,
        prefill=d.prefill_capacity,
        reason=plan.reason,
        execution_class=plan.execution_class,
        value_rate=plan.value_rate,
        log_scale=plan.log_scale,
        lanes=lanes,
    )
