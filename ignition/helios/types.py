"""Plain data a request brings across the scheduler's boundary: its handle, its spec, the
resources it draws on, and the error a rejected call raises."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


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
    """What admission needs to know about a request."""

    num_prompt_tokens: int
    max_output_tokens: int
    context_capacity: int = 1 << 20
    message_endpoints: tuple[int, ...] = ()
    image_spans: tuple[tuple[int, int], ...] = ()
    # A factory, not a class attribute: CPython 3.11 specializes no read of an attribute
    # whose class holds a Python-class instance under its name (docs/helios.md).
    proposal_source: DraftSource = field(default_factory=lambda: HEAD_DRAFTS)
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
    # The stream family it is aged with (decide/service.stream_family): its source, or its
    # choices joined when Helios chooses per round (a family must not change with every
    # round's choice). Derived in __post_init__.
    family: str = field(init=False, repr=False, compare=False)

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
        choices = self.proposal_choices or (self.proposal_source,)
        object.__setattr__(self, "family", "+".join(source.name for source in choices))

    def needs_host_feedback(self, verifies_drafts: bool) -> bool:
        """Whether a frame serving it waits for the previous one's tokens on the host (a
        copying request's only where the frame's program verifies drafts)."""
        return self.host_stops or self.grammar or (self.host_drafts and verifies_drafts)

    @property
    def uncached_prompt_tokens(self) -> int:
        """The prompt tokens this request must consume itself (after its restore): what
        bounds its newcomer start (helios/state/prompt_starts.py)."""
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
