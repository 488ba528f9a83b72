"""The plans that cross the scheduler's boundary: lanes, roles, execution classes and the
trace entry of a committed plan."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios.types import HEAD_DRAFTS, DraftSource, RequestHandle


class LaneRole(StrEnum):
    """Inference rows (prompt, decode) and state-operation rows: ``restore`` enables a
    request from a retained checkpoint, ``init`` enables a fresh request from the zero
    state (when an init program is prepared), ``snapshot`` captures an intermediate
    checkpoint, ``terminal`` retires a request through its terminal snapshot, ``vision``
    encodes a request's window of images into its feature storage. State operations
    commit no tokens and need the request idle."""

    PROMPT = "prompt"
    DECODE = "decode"
    RESTORE = "restore"
    INIT = "init"
    SNAPSHOT = "snapshot"
    TERMINAL = "terminal"
    VISION = "vision"

    @property
    def is_state_operation(self) -> bool:
        return self is not LaneRole.PROMPT and self is not LaneRole.DECODE


class SelectionReason(StrEnum):
    """The timing state of the selected graph: measured and fresh, unknown, or stale."""

    ORDINARY = "ordinary"
    DISCOVERY = "discovery"
    STALE = "stale"


class ExecutionClass(StrEnum):
    """Which budget a committed execution belongs to."""

    ORDINARY = "ordinary"
    DISCOVERY = "discovery"
    TIMING_REFRESH = "timing_refresh"
    ACCEPTANCE_LEARNING = "acceptance_learning"


@dataclass(frozen=True)
class LaneWork:
    """The logical work of one lane, frozen at plan time."""

    handle: RequestHandle
    epoch: int
    role: LaneRole
    num_prompt_tokens: int
    query_length: int
    expected_output_tokens: float
    expected_deliveries: float
    max_advance_tokens: int
    reserved_tokens: int
    value: float
    checkpoint_tokens: int = 0  # state rows: the context length restored or captured
    proposal_source: DraftSource = field(default_factory=lambda: HEAD_DRAFTS)  # as RequestSpec's


@dataclass(frozen=True)
class ScheduledPlan:
    """A frozen selection: physical shape, logical lane work, epochs, duration, score."""

    descriptor: Descriptor
    lanes: tuple[LaneWork, ...]
    prompt_row: int
    estimated_duration_ns: int
    observation_age_ns: int
    value_rate: float
    log_scale: float
    reason: SelectionReason
    requires_empty_window: bool
    planned_start_ns: int
    decision_ns: int
    exploration_credit: float = 0.0  # ns of credit its ledger held when it was selected
    execution_class: ExecutionClass = field(default_factory=lambda: ExecutionClass.ORDINARY)

    @property
    def kind(self) -> GraphKind:
        return self.descriptor.kind

    @property
    def prompt_rows(self) -> tuple[int, ...]:
        """The rows of the plan's prompt lanes, in row order (several in a multi-lane
        program; ``prompt_row`` is the first)."""
        return tuple(i for i, lane in enumerate(self.lanes) if lane.role is LaneRole.PROMPT)

    @property
    def expected_end_ns(self) -> int:
        return self.planned_start_ns + self.estimated_duration_ns

    def selection_value_rate(self) -> float:
        """The scaled score; multiply by exp(-selection_log_scale()) for value units."""
        return self.value_rate

    def selection_log_scale(self) -> float:
        return self.log_scale

    def lane_of(self, handle: RequestHandle) -> LaneWork | None:
        for lane in self.lanes:
            if lane.handle == handle:
                return lane
        return None


@dataclass(frozen=True)
class TraceEntry:
    """One committed plan, as the decision trace reports it."""

    fence: int
    time_ns: int
    kind: str
    batch_capacity: int
    proposal_depth: int
    token_capacity: int
    packed_capacity: int
    prefill_capacity: int
    lanes: tuple[dict, ...] = field(default_factory=tuple)
    estimated_duration_ns: int = 0
    observation_age_ns: int = -1
    value_rate: float = 0.0
    log_scale: float = 0.0
    reason: str = SelectionReason.ORDINARY.value
    exploration_credit: float = 0.0
    execution_class: str = ExecutionClass.ORDINARY.value
    credit_spent_ns: int = 0  # filled in when the episode completes and pays
