"""Plain data that crosses the scheduler's boundary: requests, plans, completions.

Everything here is immutable so that a plan, once returned by ``plan()``, can be
committed later (or never) without the scheduler's state leaking into it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind


class SchedulerError(ValueError):
    """A rejected scheduler call; the scheduler's state is unchanged."""


class ResourceShortage(SchedulerError):
    """A commit the free KV pages cannot cover: only a completion, a cancellation or a
    preemption frees pages, so the runtime decides which (the scheduler never does)."""


@dataclass(frozen=True, order=True)
class DraftSource:
    """A proposal source as Helios knows it: the name its acceptance is learned, its streams
    aged and its rounds counted under. What it offers is the runtime's
    (runtime/proposals); Helios only tells sources apart."""

    name: str

    def __post_init__(self) -> None:
        if not self.name or "+" in self.name:
            raise SchedulerError(f"draft source {self.name!r}: must be a name without '+'")

    def __str__(self) -> str:
        return self.name


# The MTP head's learned drafts: a request's source unless it names another.
HEAD_DRAFTS = DraftSource("mtp")


@dataclass(frozen=True, order=True)
class RequestHandle:
    """A request slot plus the generation that owns it; slot reuse bumps the generation,
    so a cancelled handle can never be confused with its slot's next owner."""

    slot: int
    generation: int


@dataclass(frozen=True, order=True)
class Fence:
    """Identity of one submitted frame; fences are committed in increasing order."""

    value: int


@dataclass(frozen=True)
class RequestSpec:
    """What admission needs to know about a request.

    ``message_endpoints`` are prompt positions where a message ends (exploration stops
    there); ``image_spans`` are atomic ``[start, end)`` placeholder spans that no prefill
    chunk may split. ``acceptance_prior`` preseeds per-depth acceptance means.

    Checkpoint retention: ``restore_tokens`` is the length of a retained checkpoint
    matching the prompt's prefix, restored as a prerequisite before any prompt work
    (only the rest is prefilled); ``capture_ends`` are prompt endpoints where prefill
    is cut and an intermediate snapshot captures the state before work continues;
    ``terminal_snapshot`` retires the request through a terminal snapshot after its
    validated termination instead of releasing it at once.

    Vision windows (helios/vision_windows.py): ``window_stop`` is a capture end where
    this generation's prefill stops for good; once captured, the generation is held
    (never selected) until the runtime rebinds the request to a fresh generation.
    ``vision_patches`` > 0: the generation's window of images must be encoded by a vision
    prerequisite (a vision program of at least that many patches, the window's largest
    image) before any of its prefill, after its restore if it has one.
    """

    num_prompt_tokens: int
    max_output_tokens: int
    context_capacity: int = 1 << 20
    message_endpoints: tuple[int, ...] = ()
    image_spans: tuple[tuple[int, int], ...] = ()
    proposal_source: DraftSource = HEAD_DRAFTS
    acceptance_prior: tuple[float, ...] = ()
    restore_tokens: int = 0
    capture_ends: tuple[int, ...] = ()
    terminal_snapshot: bool = False
    window_stop: int = 0  # 0: none
    vision_patches: int = 0  # 0: no vision prerequisite
    # Drafts one round may verify (None: as many as the programs hold). The seed's
    # acceptance "respects available proposals, grammar and stop restrictions": a
    # grammar-constrained request verifies only the drafts the runtime supplies, whose
    # count it reports after each frame (Scheduler.limit_drafts).
    max_drafts: int | None = None
    # The runtime's clock when the logical request was first admitted; the generations
    # that resume, restart or rebind it keep it. Under a page shortage the latest gives
    # way (Scheduler.preemption_victim).
    admitted_ns: int = 0
    # Stop strings the host finds in published text: each frame
    # serving this request needs completion feedback before another frame is queued, so
    # the request never has a second frame whose tokens a stop would drop.
    host_stops: bool = False
    # A grammar-constrained request (structured outputs): the host computes its token masks
    # and drafts from every token before them, so each frame serving it needs completion
    # feedback (the seed's grammar rule), and its max_drafts follows its proposals.
    grammar: bool = False
    # Drafts the host finds from every token before them (copy proposals, the "ngram"
    # source): each round program serving it needs completion feedback (decode frames
    # pipeline as others'), and its max_drafts follows its proposals.
    host_drafts: bool = False
    # Proposal sources Helios chooses among for each round (the MTP head's drafts or copies
    # of the context: issue 28's "both"), in preference order for ties; proposal_source is
    # then the next round's choice (Scheduler.offer_drafts). Empty: proposal_source serves
    # the request's whole life.
    proposal_choices: tuple[DraftSource, ...] = ()

    def __post_init__(self) -> None:
        if self.num_prompt_tokens < 1:
            raise SchedulerError(f"num_prompt_tokens = {self.num_prompt_tokens}: must be >= 1")
        if self.max_output_tokens < 1:
            raise SchedulerError(f"max_output_tokens = {self.max_output_tokens}: must be >= 1")
        if self.context_capacity < self.num_prompt_tokens + 1:
            raise SchedulerError(
                f"context_capacity = {self.context_capacity}: below prompt + one output token"
            )
        for start, end in self.image_spans:
            if not 0 <= start < end <= self.num_prompt_tokens:
                raise SchedulerError(f"image span ({start}, {end}) outside the prompt")
        if not 0 <= self.restore_tokens < self.num_prompt_tokens:
            raise SchedulerError(
                f"restore_tokens = {self.restore_tokens}: must lie in [0, num_prompt_tokens)"
            )
        for end in self.capture_ends:
            if not self.restore_tokens < end <= self.num_prompt_tokens:
                raise SchedulerError(
                    f"capture end {end} outside ({self.restore_tokens}, {self.num_prompt_tokens}]"
                )
        if self.window_stop and self.window_stop not in self.capture_ends:
            raise SchedulerError(f"window_stop = {self.window_stop}: must be a capture end")
        if self.max_drafts is not None and self.max_drafts < 0:
            raise SchedulerError(f"max_drafts = {self.max_drafts}: must be >= 0 (or None)")
        for source in (self.proposal_source, *self.proposal_choices):
            if not isinstance(source, DraftSource):
                raise SchedulerError(f"proposal source {source!r}: must be a DraftSource")
        if self.proposal_choices and (
            self.proposal_source not in self.proposal_choices
            or len(set(self.proposal_choices)) != len(self.proposal_choices)
        ):
            raise SchedulerError(
                f"proposal_choices = {[c.name for c in self.proposal_choices]}: must be "
                f"distinct and hold proposal_source {self.proposal_source.name!r}"
            )
        for p in self.acceptance_prior:
            if not (math.isfinite(p) and 0.0 <= p <= 1.0):
                raise SchedulerError(f"acceptance_prior value {p!r}: must be a probability")

    def needs_host_feedback(self, verifies_drafts: bool) -> bool:
        """Whether a frame serving it waits for the previous one's tokens on the host (a
        copying request's only where the frame's program verifies drafts)."""
        return self.host_stops or self.grammar or (self.host_drafts and verifies_drafts)

    @property
    def family(self) -> str:
        """The stream family it is aged with (decide/service.stream_family): its source, or
        its choices joined when Helios chooses per round (a family must not change
        with every round's choice)."""
        choices = self.proposal_choices or (self.proposal_source,)
        return "+".join(source.name for source in choices)

    @property
    def uncached_prompt_tokens(self) -> int:
        """The prompt tokens this request must consume itself (after its restore): what
        bounds its newcomer start (helios/prompt_starts.py)."""
        return self.num_prompt_tokens - self.restore_tokens


@dataclass(frozen=True)
class Resources:
    """Execution resources the scheduler hands out: request slots and KV pages."""

    num_request_slots: int = 64
    num_pages: int = 1 << 16
    page_size_tokens: int = 64

    def __post_init__(self) -> None:
        if not 1 <= self.num_request_slots <= 64:
            raise SchedulerError(
                f"num_request_slots = {self.num_request_slots}: selection is bounded to 64"
            )
        if self.num_pages < 1 or self.page_size_tokens < 1:
            raise SchedulerError("num_pages and page_size_tokens must be positive")


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
    """Which budget a committed execution belongs to.

    ``ordinary`` selection (fresh or stale winners) earns exploration credit;
    ``discovery`` of an unknown cost earns nothing and is accounted separately;
    ``timing_refresh`` and ``acceptance_learning`` episodes spend their ledger's credit.
    """

    ORDINARY = "ordinary"
    DISCOVERY = "discovery"
    TIMING_REFRESH = "timing_refresh"
    ACCEPTANCE_LEARNING = "acceptance_learning"


@dataclass(frozen=True)
class LaneWork:
    """The logical work of one lane, frozen at plan time.

    ``query_length`` is the host-fixed target rows (pending token + drafts) for
    ``query_length`` programs, and the device ceiling for ``speculative_prefix_limit``
    programs. ``max_advance_tokens`` bounds committed output so queued frames keep
    output limits and positions honest.
    """

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
    # Where a decode lane's drafts come from this round (RequestSpec.proposal_source at plan
    # time): the runtime binds that source's drafts, and acceptance is observed for it.
    proposal_source: DraftSource = HEAD_DRAFTS


@dataclass(frozen=True)
class ScheduledPlan:
    """A frozen selection: physical shape, logical lane work, epochs, duration, score.

    A prefill or mixed program may carry up to ``descriptor.prompt_lanes`` prompt lanes
    (lanes whose role is ``prompt``); ``prompt_rows`` lists them in row order and
    ``prompt_row`` is the first of them (-1: none), the single-lane case as it was.
    """

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
    execution_class: ExecutionClass = ExecutionClass.ORDINARY

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
class CompletionRecord:
    """What the device reports for one lane.

    ``num_verified_tokens`` is the device's allocation for ``speculative_prefix_limit``
    programs (0 when the host fixed the lengths). ``is_finished`` marks validated
    termination (stop token or stop sequence); output limits finish a request anyway.
    """

    handle: RequestHandle
    num_prompt_tokens: int = 0
    token_ids: tuple[int, ...] = ()
    is_finished: bool = False
    num_verified_tokens: int = 0


@dataclass(frozen=True)
class ExecutionTiming:
    """``device_ns``: the maximum rank-local replay interval (0 = missing);
    ``wall_ns``: host dispatch through observed completion; ``readiness_stall_ns``:
    exposed embedding-delivery delay removed from cost samples only."""

    device_ns: int
    wall_ns: int = 0
    readiness_stall_ns: int = 0
    # Each rank's device interval under tensor parallelism (rank order); device_ns is then
    # their maximum positive value. Empty on one rank.
    rank_device_ns: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if min(self.device_ns, self.wall_ns, self.readiness_stall_ns, *self.rank_device_ns) < 0:
            raise SchedulerError("execution timing intervals must be nonnegative")
        if self.rank_device_ns and self.device_ns != max(self.rank_device_ns):
            raise SchedulerError(
                f"device_ns {self.device_ns} is not the maximum of the ranks' intervals "
                f"{list(self.rank_device_ns)}"
            )

    @classmethod
    def across_ranks(
        cls, rank_device_ns: tuple[int, ...], wall_ns: int = 0, readiness_stall_ns: int = 0
    ) -> ExecutionTiming:
        """The frame's timing from every rank's interval: the cost sample is their maximum
        (a rank that measured nothing, 0, leaves the others' maximum)."""
        return cls(max(rank_device_ns, default=0), wall_ns, readiness_stall_ns, rank_device_ns)


@dataclass(frozen=True)
class ConfidenceSidecar:
    """The FP32 sidecar of a confidence-producing program, shape [2, request_slots, D].

    Plane 0 holds joint prefix probabilities (what the device allocated by); plane 1
    holds per-position conditional confidences. Only rank zero's copy drives the host.
    """

    planes: tuple[tuple[tuple[float, ...], ...], tuple[tuple[float, ...], ...]]

    def joint_prefix(self, lane_index: int) -> tuple[float, ...]:
        return self.planes[0][lane_index]


@dataclass(frozen=True)
class CompletionReport:
    """Everything the worker reports for one completed frame: one record per lane, the
    timing, the confidence sidecar a device-allocated speculative round (D > 0) must
    carry, and the completion_speculative_survival rows (one per lane) where the program
    writes them. ``complete`` validates all of it before changing any state."""

    records: Sequence[CompletionRecord]
    timing: ExecutionTiming
    sidecar: ConfidenceSidecar | None = None
    survival: Sequence[Sequence[float]] | None = None


@dataclass(frozen=True)
class GeneratedToken:
    handle: RequestHandle
    token_id: int
    output_index: int
    fence: Fence
    is_last: bool = False


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
