"""Read-only answers the scheduler gives the runtime (SchedulerProtocol's queries):
frozen copies, so the runtime never holds a reference into the scheduler's state."""

from __future__ import annotations

from dataclasses import dataclass, field

from ignition.components.descriptor import Descriptor
from ignition.helios.plans import TraceEntry
from ignition.helios.types import RequestHandle


@dataclass(frozen=True)
class RequestView:
    """One admitted request as the runtime may see it. ``remaining_output``: the output
    tokens this admission may still commit (its spec's limit less its committed output),
    Helios's count, which the runtime carries into a readmission instead of keeping its own."""

    handle: RequestHandle
    is_live: bool
    num_pages: int
    remaining_output: int
    is_terminal_pending: bool = False
    terminal_has_value: bool = False
    is_window_held: bool = False


@dataclass(frozen=True)
class ResourceUsage:
    """Request slots and KV pages. ``num_pages`` 0: the scheduler keeps no page ledger
    (the direct scheduler), so there is no page usage to report."""

    num_request_slots: int
    num_free_slots: int
    num_pages: int
    num_free_pages: int
    page_size_tokens: int


@dataclass(frozen=True)
class CostEstimate:
    """A program's duration estimate (0: unmeasured) and whether it is fresh now."""

    estimate_ns: int
    is_fresh: bool


@dataclass(frozen=True)
class Programs:
    """The prepared programs the scheduler selects from: inference programs (prefill,
    decode, speculative, mixed) and state operations (restore, init, snapshot, vision)."""

    inference: tuple[Descriptor, ...]
    state: tuple[Descriptor, ...] = ()


@dataclass(frozen=True)
class PreemptionVictim:
    """Who gives way to a commit the free pages cannot cover. ``holds_pages`` False: the
    request holds no pages, so it is only deferred, not preempted."""

    handle: RequestHandle
    holds_pages: bool


@dataclass(frozen=True)
class SchedulerStatistics:
    """Per execution class (ordinary, discovery, timing_refresh, acceptance_learning):
    ``executions``, ``nanoseconds``, ``episodes`` and ``last_episode_ns``; and the decision
    trace of committed plans, oldest first."""

    execution_totals: dict[str, dict[str, int]] = field(default_factory=dict)
    trace: tuple[TraceEntry, ...] = ()
