"""Value arithmetic: lane values, the value-rate objective and candidate ranking."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios.decide.service import Prices, token_normalizer
from ignition.helios.plans import LaneRole
from ignition.helios.state.cost import Freshness
from ignition.helios.types import RequestHandle

RELATIVE_TIE = 1e-9

Measured = Iterable[tuple[Descriptor, float]]


def generation_start_rate(measured: Measured, num_streams: int) -> float | None:
    """The highest per-stream token rate a measured *generation* graph (decode or
    speculative) offers the K live streams: parity with a decoder served at the fastest
    batch-feasible rate."""
    measured = list(measured)
    generation = [
        (d, t) for d, t in measured if d.kind in (GraphKind.DECODE, GraphKind.SPECULATIVE)
    ]
    rate = token_normalizer(generation, num_streams)
    return rate if rate is not None else token_normalizer(measured, num_streams)


def normalizer_start_rate(measured: Measured, num_streams: int) -> float | None:
    """The token normalizer over every measured graph (docs/utility.md's rule)."""
    return token_normalizer(measured, num_streams)


def balanced_start_rate(measured: Measured, num_streams: int) -> float | None:
    """The newcomer rule (docs/scheduling.md): the geometric mean of the two yardsticks,
    the generation start rate and the token normalizer."""
    measured = list(measured)
    low = generation_start_rate(measured, num_streams)
    high = normalizer_start_rate(measured, num_streams)
    if low is None or high is None:
        return high if low is None else low
    return math.sqrt(low * high)


# "balanced" is bounded per request by the prompt it can absorb (prompt_starts.py,
# BOUNDED_RULES); "whole-prompt" is the same start without that bound (the rule before
# issue 10's later-turn study), kept for before/after comparisons. The keys are
# config.NEWCOMER_RULE_NAMES; PolicyConfig.newcomer_rule names the one a scheduler runs.
NEWCOMER_RULES: dict[str, Callable[[Measured, int], float | None]] = {
    "balanced": balanced_start_rate,
    "whole-prompt": balanced_start_rate,
    "generation": generation_start_rate,
    "normalizer": normalizer_start_rate,
}


def newcomer_token_rate(measured: Measured, num_streams: int, rule: str) -> float | None:
    """Starting token rate for a request without token history under newcomer ``rule``
    (``PolicyConfig.newcomer_rule``)."""
    return NEWCOMER_RULES[rule](measured, num_streams)


# LaneView.max_rows of a request whose drafts are not limited (RequestSpec.max_drafts None):
# above every program's width, so min() with it leaves the program's ceiling
UNLIMITED_ROWS = 1 << 30


@dataclass(slots=True)
class LaneView:
    """A request as one decision sees it: projected to the queue's expected end."""

    handle: RequestHandle
    epoch: int
    is_decoder: bool
    prompt_position: int
    num_prompt_tokens: int
    remaining_output: int
    remaining_context: int
    prices: Prices  # already scaled
    age_ms: float
    last_served_seq: int
    sigma_ms: float | None = None  # the reference interval of this stream's family
    survivals: tuple[float, ...] = ()
    forecast: tuple[float, ...] = ()
    message_endpoints: tuple[int, ...] = ()
    image_spans: tuple[tuple[int, int], ...] = ()
    capture_ends: tuple[int, ...] = ()  # prefill is cut here for a checkpoint capture
    vision_patches: int = 0  # > 0: a vision prerequisite of this many patches is pending
    # > 0: after its pending restore, a vision prerequisite of this many patches follows
    # (a chain restore -> vision -> inference, ranked by the continuation index).
    chained_patches: int = 0
    max_rows: int = UNLIMITED_ROWS  # rows a round may give it (projection.row_limit)

    @property
    def slot(self) -> int:
        return self.handle.slot

    @property
    def remaining_prompt(self) -> int:
        return self.num_prompt_tokens - self.prompt_position


@dataclass(frozen=True)
class Decision:
    """Quantities shared by every candidate of one decision (already scaled)."""

    age_price: float  # c, scaled
    num_active_decoders: int
    alpha: float
    log_scale: float
    terminal_age_price: float = 0.0  # scaled; every pending retirement ages at this price
    num_terminal: int = 0
    tbt_target_ms: float = 0.0  # PolicyConfig.tbt_target_ms (decide/chunk_target.py)
    generation_left_out: bool = False  # PolicyConfig.generation_left_out (left_out.py)
    left_out: bool = True  # PolicyConfig.left_out (left_out.py)
    prompt_runs: bool = False  # PolicyConfig.prompt_runs (decide/prompt_runs.py)
    # PolicyConfig.speculation_within_target (decide/chunk_target.py)
    speculation_within_target: bool = False
    refresh_could_win: bool = False  # PolicyConfig.refresh_could_win (decide/refresh.py)
    # PolicyConfig.cadence_ramp (decide/cadence_ramp.py): the decoders' weight in the
    # waiting cost, the sum of their ramps; None: the number of active decoders
    decoder_age_weight: float | None = None

    def age_value(self, sigma_ms: float | None, age_ms: float, duration_ms: float) -> float:
        """c * sigma_i * (A_i + T); sigma_i is the stream's family reference interval."""
        if sigma_ms is None or self.age_price == 0:
            return 0.0
        return self.age_price * sigma_ms * (age_ms + duration_ms)

    @property
    def waiting_coefficient(self) -> float:
        """Age coefficients of active decoders plus those of pending retirements."""
        weight = self.decoder_age_weight
        if weight is None:
            weight = self.num_active_decoders
        return self.age_price * weight + self.terminal_age_price * self.num_terminal

    def waiting_cost(self, duration_ms: float) -> float:
        return duration_ms / 2.0 * self.waiting_coefficient


@dataclass(slots=True)
class LanePick:
    view: LaneView
    role: LaneRole
    num_prompt_tokens: int = 0
    query_length: int = 1
    expected_output: float = 0.0
    expected_deliveries: float = 0.0
    max_advance: int = 0
    reserved_tokens: int = 0
    value: float = 0.0


@dataclass(slots=True, eq=False)
class Candidate:
    """One graph with its best cohort. Lanes are built lazily: most candidates lose, and
    ranking needs only their value, lane count and logical-work identity."""

    descriptor: Descriptor
    duration_ns: int
    freshness: Freshness
    total_value: float
    num_lanes: int
    work_key: tuple
    build: Callable[[], tuple[list[LanePick], int]]
    score: float = 0.0
    built: tuple[list[LanePick], int] | None = None

    @property
    def lanes(self) -> list[LanePick]:
        if self.built is None:
            self.built = self.build()
        return self.built[0]

    @property
    def prompt_row(self) -> int:
        if self.built is None:
            self.built = self.build()
        return self.built[1]

    @property
    def is_indeterminate(self) -> bool:
        return self.freshness is Freshness.UNKNOWN

    @property
    def duration_ms(self) -> float:
        return self.duration_ns / 1e6

    def physical_padding(self) -> int:
        d = self.descriptor
        rows = sum(lane.query_length if lane.role is LaneRole.DECODE else 0 for lane in self.lanes)
        prompt = sum(lane.num_prompt_tokens for lane in self.lanes)
        capacity = d.packed_capacity + d.prefill_capacity
        return max(0, capacity - rows - prompt) + (d.batch_capacity - len(self.lanes))


def consumable_tokens(view: LaneView, capacity: int) -> int:
    """Prompt tokens one row of ``capacity`` can consume: prompt length and atomic image
    spans restrict the logical work (a span never splits across chunks)."""
    start = view.prompt_position
    end = min(view.num_prompt_tokens, start + capacity)
    for span_start, span_end in view.image_spans:
        if span_start < end < span_end:
            end = span_start
    for cut in view.capture_ends:
        if start < cut < end:
            end = cut  # a checkpoint capture needs the chunk to end exactly there
    return max(0, end - start)


def prompt_capacity(d: Descriptor) -> int:
    """The prompt tokens one row of ``d`` can consume in a frame (0: it takes none)."""
    if d.kind is GraphKind.MIXED:
        return d.prefill_capacity
    if d.kind is GraphKind.PREFILL:
        return d.token_capacity
    return 0


def tokens_to_endpoint(view: LaneView) -> int:
    """Tokens up to the next message endpoint or the prompt end."""
    start = view.prompt_position
    later = [e for e in view.message_endpoints if e > start]
    return min([*later, view.num_prompt_tokens]) - start


def prompt_lane(view: LaneView, num_tokens: int) -> LanePick:
    """A prefill row earns its consumed tokens and at most one output token."""
    completes = view.prompt_position + num_tokens >= view.num_prompt_tokens
    value = view.prices.prefill_token * num_tokens
    if completes:
        value += view.prices.output_token + view.prices.delivery  # first delivery
    return LanePick(
        view=view,
        role=LaneRole.PROMPT,
        num_prompt_tokens=num_tokens,
        query_length=0,
        expected_output=1.0 if completes else 0.0,
        expected_deliveries=0.0,
        max_advance=1 if completes else 0,
        reserved_tokens=num_tokens + (1 if completes else 0),
        value=value,
    )


def decode_lane(
    view: LaneView,
    decision: Decision,
    duration_ms: float,
    query_length: int,
    expected_output: float,
    reserved_tokens: int,
) -> LanePick:
    value = (
        view.prices.output_token * expected_output
        + view.prices.delivery
        + decision.age_value(view.sigma_ms, view.age_ms, duration_ms)
    )
    return LanePick(
        view=view,
        role=LaneRole.DECODE,
        query_length=query_length,
        expected_output=expected_output,
        expected_deliveries=1.0,
        max_advance=query_length,
        reserved_tokens=reserved_tokens,
        value=value,
    )


def finish(candidate: Candidate, decision: Decision) -> Candidate:
    """Score a candidate; an unknown duration scores its work optimistically."""
    if candidate.is_indeterminate:
        candidate.score = candidate.total_value
    else:
        t = candidate.duration_ms
        candidate.score = candidate.total_value / t - decision.waiting_cost(t)
    return candidate


def _close(a: float, b: float) -> bool:
    if math.isinf(a) or math.isinf(b):  # a rejected score (-inf) ties only with another
        return a == b
    return abs(a - b) <= RELATIVE_TIE * max(1.0, abs(a), abs(b))


def compare(a: Candidate, b: Candidate) -> int:
    """Negative when ``a`` ranks before ``b``."""
    if a.is_indeterminate != b.is_indeterminate:
        return -1 if a.is_indeterminate else 1
    if not _close(a.score, b.score):
        return -1 if a.score > b.score else 1
    if a.duration_ns != b.duration_ns and not (a.is_indeterminate and b.is_indeterminate):
        return -1 if a.duration_ns < b.duration_ns else 1
    if a.num_lanes != b.num_lanes:
        return -1 if a.num_lanes > b.num_lanes else 1
    recency_a = sorted((lane.view.last_served_seq for lane in a.lanes), reverse=True)
    recency_b = sorted((lane.view.last_served_seq for lane in b.lanes), reverse=True)
    if recency_a != recency_b:
        return -1 if recency_a < recency_b else 1
    pad_a, pad_b = a.physical_padding(), b.physical_padding()
    if pad_a != pad_b:
        return -1 if pad_a < pad_b else 1
    return 0


def lane_order_key(view: LaneView, value: float) -> tuple[float, int, int]:
    """Highest value first; equal values prefer less recently served, then lower slot."""
    return (-value, view.last_served_seq, view.slot)
