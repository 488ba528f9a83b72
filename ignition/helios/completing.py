"""Helios's completion: the oldest frame's records validated, then costs, acceptance,
prices, credit and committed state updated, and request resources released.
A rejected report raises SchedulerError and changes no state."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import replace

from ignition.components.descriptor import Descriptor
from ignition.helios.completion import validate_records
from ignition.helios.config import PolicyConfig
from ignition.helios.decide.refresh import ExecutionBooks
from ignition.helios.fast.projection import current_normalizers
from ignition.helios.plans import TraceEntry
from ignition.helios.reports import CompletionReport, GeneratedToken
from ignition.helios.state.accounting import Publication, apply_lane, charge_service
from ignition.helios.state.cost import CostModel
from ignition.helios.state.queue import NUM_FRAME_SLOTS, ExecutionQueue
from ignition.helios.state.requests import ScheduledRequest, ResourcePool
from ignition.helios.state_work import apply_state_lane
from ignition.helios.types import Fence, RequestHandle, SchedulerError


class Completing:
    """Mixed into :class:`ignition.helios.scheduler.Scheduler`, which owns these fields."""

    requests: dict[RequestHandle, ScheduledRequest]
    pool: ResourcePool
    queue: ExecutionQueue
    costs: CostModel
    books: ExecutionBooks
    policy: PolicyConfig
    descriptors: tuple[Descriptor, ...]
    trace: deque[TraceEntry]
    now_ns: int
    _changes: int
    _has_snapshot: bool
    _publishable: dict[RequestHandle, Publication]
    _pages_needed: Callable[..., int]

    def complete(self, fence: Fence, report: CompletionReport) -> list[GeneratedToken]:
        """The one completion call; a device-allocated round's report carries its
        confidence sidecar, and survival rows replace binary acceptance observations."""
        records, timing = report.records, report.timing
        sidecar, survival = report.sidecar, report.survival
        head = self.queue.head()
        if head is None or head.fence != fence.value:
            expected = "none" if head is None else head.fence
            raise SchedulerError(f"fence {fence.value} is not the oldest in flight ({expected})")
        validate_records(head.plan, records, self.requests, sidecar, survival)
        frame = self.queue.pop_head()
        plan = frame.plan
        d = plan.descriptor
        if timing.device_ns > 0:
            self.costs.observe(d, timing.device_ns - timing.readiness_stall_ns, self.now_ns)
        spent = self.books.account(plan.execution_class, frame.fence, timing, frame.was_queued)
        if spent is not None:
            self._record_spent(frame.fence, spent)
        self._publishable = charge_service(
            frame,
            records,
            timing,
            self.requests,
            self.policy,
            lambda: current_normalizers(
                self.descriptors, self.costs, self.requests.values(), self.policy.newcomer_rule
            ),
        )
        tokens: list[GeneratedToken] = []
        for i, (lane, record) in enumerate(zip(plan.lanes, records, strict=True)):
            r = self.requests[lane.handle]
            r.inflight.remove(fence.value)
            r.epoch += 1
            if lane.role.is_state_operation:
                apply_state_lane(r, lane)
            elif r.is_live:
                tokens += apply_lane(r, plan, i, record, fence, sidecar, survival, self.now_ns)
                if r.is_finished and r.spec.terminal_snapshot and self._has_snapshot:
                    r.terminal_since_ns = self.now_ns  # validated completion found termination
            if r.is_releasable:
                self._release(r)
            elif r.handle in self.requests:
                new_pages = self._pages_needed(r)
                self.pool.adjust_pages(new_pages - r.num_pages)
                r.num_pages = new_pages
        self._changes += 1
        self._note_idle()
        return tokens

    def _record_spent(self, fence: int, ns: int) -> None:
        """Complete the trace entry of an episode with the credit it spent."""
        for i in range(len(self.trace) - 1, max(-1, len(self.trace) - 2 - NUM_FRAME_SLOTS), -1):
            if self.trace[i].fence == fence:
                self.trace[i] = replace(self.trace[i], credit_spent_ns=ns)
                return

    def _note_idle(self) -> None:
        """With nothing submitted and no live request the scheduler is idle: both ledgers
        discard positive credit and keep debt."""
        if self.queue.is_empty and not any(r.is_live for r in self.requests.values()):
            self.books.idle()

    def execution_totals(self) -> dict[str, dict[str, int]]:
        """Per execution class (ordinary, discovery, timing_refresh, acceptance_learning):
        ``executions``, ``nanoseconds``, ``episodes`` and ``last_episode_ns``."""
        return self.books.totals()

    def published_output(self, handle: RequestHandle, fence: Fence) -> None:
        """The first visible publication for a fence turns its zero deliveries into one."""
        pub = self._publishable.get(handle)
        if pub is None or pub.fence != fence.value:
            raise SchedulerError(f"{handle} has no pending publication for fence {fence.value}")
        r = self.requests.get(handle)
        if r is not None and r.is_live:
            r.last_output_ns = self.now_ns
        if pub.is_published:
            return
        pub.is_published = True
        self._changes += 1
        if r is None or r.is_cancelled or pub.duration_ms <= 0:
            return
        if pub.had_history and r.rates.delivery_rate is not None:
            r.rates.delivery_rate += (1 - pub.decay) / pub.duration_ms
        else:
            r.rates.delivery_rate = 1.0 / pub.duration_ms

    def _release(self, r: ScheduledRequest) -> None:
        self.pool.adjust_pages(-r.num_pages)
        r.num_pages = 0
        self.pool.release_slot(r.handle)
        del self.requests[r.handle]
