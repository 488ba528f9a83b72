"""Per-request state and the execution resources it owns (request slots, KV pages).
Pages and slots stay owned through a request's last submitted fence."""

from __future__ import annotations

from dataclasses import dataclass, field

from ignition.helios.state.acceptance import ConfidenceForecast
from ignition.helios.state.acceptance import AcceptanceTracker
from ignition.helios.state.rates import ServiceRates
from ignition.helios.types import RequestHandle, RequestSpec, Resources, SchedulerError


@dataclass
class ScheduledRequest:
    handle: RequestHandle
    spec: RequestSpec
    acceptance: AcceptanceTracker
    forecast: ConfidenceForecast
    epoch: int = 0
    prompt_position: int = 0  # committed consumed prompt tokens
    num_output: int = 0  # committed output tokens
    is_finished: bool = False
    is_cancelled: bool = False
    rates: ServiceRates = field(default_factory=ServiceRates)
    last_output_ns: int = -1  # last visible publication (or when decoding began)
    last_served_seq: int = 0
    inflight: list[int] = field(default_factory=list)  # fence values, oldest first
    num_pages: int = 0
    is_restored: bool = False
    captured: set[int] = field(default_factory=set)  # capture ends already snapshotted
    terminal_since_ns: int = -1  # terminal retirement pending since (validated completion)
    is_preempted: bool = False
    is_vision_ready: bool = False  # the vision prerequisite of this generation completed
    is_initialized: bool = True

    @property
    def needs_restore(self) -> bool:
        return self.spec.restore_tokens > 0 and not self.is_restored

    @property
    def needs_init(self) -> bool:
        return not self.is_initialized

    @property
    def pending_capture(self) -> int | None:
        """The capture end the request stands at and has not snapshotted yet."""
        position = self.prompt_position
        if position in self.spec.capture_ends and position not in self.captured:
            return position
        return None

    @property
    def is_window_held(self) -> bool:
        """Prefill reached and captured this generation's window stop: nothing more to
        select until the runtime rebinds the request to its next window's generation."""
        stop = self.spec.window_stop
        return bool(stop) and stop in self.captured

    @property
    def needs_vision(self) -> bool:
        """Its window of images awaits encoding (after any restore, before prefill)."""
        return (
            self.spec.vision_patches > 0
            and not self.is_vision_ready
            and not self.needs_restore
            and not self.needs_init
        )

    @property
    def awaits_prerequisite(self) -> bool:
        return (
            self.needs_restore
            or self.needs_init
            or self.needs_vision
            or self.pending_capture is not None
        )

    @property
    def is_terminal_pending(self) -> bool:
        return self.terminal_since_ns >= 0 and not self.is_cancelled

    @property
    def is_releasable(self) -> bool:
        return not self.is_live and not self.inflight and not self.is_terminal_pending

    @property
    def is_decoder(self) -> bool:
        return self.prompt_position >= self.spec.num_prompt_tokens

    @property
    def is_live(self) -> bool:
        return not (self.is_finished or self.is_cancelled or self.is_preempted)

    @property
    def context_tokens(self) -> int:
        return self.prompt_position + self.num_output

    @property
    def remaining_output(self) -> int:
        return self.spec.max_output_tokens - self.num_output

    @property
    def remaining_context(self) -> int:
        return self.spec.context_capacity - self.context_tokens


class ResourcePool:
    """Request slots (with generations) and KV pages; check/act pairs change nothing on
    failure."""

    def __init__(self, resources: Resources) -> None:
        self.resources = resources
        self._free_slots = list(range(resources.num_request_slots))
        self._generations = [0] * resources.num_request_slots
        self.num_free_pages = resources.num_pages

    def can_allocate_slot(self) -> bool:
        return bool(self._free_slots)

    def allocate_slot(self) -> RequestHandle:
        if not self._free_slots:
            raise SchedulerError(
                f"no free request slot: all {self.resources.num_request_slots} are owned"
            )
        slot = self._free_slots.pop(0)
        self._generations[slot] += 1
        return RequestHandle(slot, self._generations[slot])

    def release_slot(self, handle: RequestHandle) -> None:
        if handle.slot in self._free_slots or self._generations[handle.slot] != handle.generation:
            raise SchedulerError(f"slot {handle.slot} is not owned by {handle}")
        self._free_slots.append(handle.slot)
        self._free_slots.sort()

    def is_current(self, handle: RequestHandle) -> bool:
        return (
            0 <= handle.slot < len(self._generations)
            and self._generations[handle.slot] == handle.generation
            and handle.slot not in self._free_slots
        )

    def pages_for(self, num_tokens: int) -> int:
        size = self.resources.page_size_tokens
        return -(-num_tokens // size)

    def adjust_pages(self, delta: int) -> None:
        if delta > self.num_free_pages:
            raise SchedulerError(f"needs {delta} KV pages but only {self.num_free_pages} are free")
        self.num_free_pages -= delta

    @property
    def num_owned_slots(self) -> int:
        return self.resources.num_request_slots - len(self._free_slots)
