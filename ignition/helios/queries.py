"""What the runtime may ask Helios, and Helios's side of preemption. Nothing here
changes scheduling state."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from ignition.components.descriptor import Descriptor
from ignition.helios.config import PolicyConfig
from ignition.helios.decide.refresh import ExecutionBooks
from ignition.helios.plans import ScheduledPlan, TraceEntry
from ignition.helios.state.cost import CostModel, Freshness
from ignition.helios.state.requests import ScheduledRequest, ResourcePool
from ignition.helios.types import RequestHandle
from ignition.helios.views import (
    CostEstimate,
    PreemptionVictim,
    Programs,
    RequestView,
    ResourceUsage,
    SchedulerStatistics,
)


class SchedulerQueries:
    """Mixed into :class:`ignition.helios.scheduler.Scheduler`, which owns these fields."""

    pool: ResourcePool
    requests: dict[RequestHandle, ScheduledRequest]
    costs: CostModel
    policy: PolicyConfig
    books: ExecutionBooks
    trace: deque[TraceEntry]
    descriptors: tuple[Descriptor, ...]
    state_descriptors: tuple[Descriptor, ...]
    now_ns: int

    def can_admit(self) -> bool:
        """Whether ``admit`` finds a free request slot now."""
        return self.pool.can_allocate_slot()

    def usage(self) -> ResourceUsage:
        resources = self.pool.resources
        return ResourceUsage(
            num_request_slots=resources.num_request_slots,
            num_free_slots=resources.num_request_slots - self.pool.num_owned_slots,
            num_pages=resources.num_pages,
            num_free_pages=self.pool.num_free_pages,
            page_size_tokens=resources.page_size_tokens,
        )

    def request(self, handle: RequestHandle) -> RequestView | None:
        """The request ``handle`` names while Helios holds it; None once released."""
        r = self.requests.get(handle)
        if r is None:
            return None
        return RequestView(
            handle=handle,
            is_live=r.is_live,
            num_pages=r.num_pages,
            remaining_output=r.remaining_output,
            is_terminal_pending=r.is_terminal_pending,
            terminal_has_value=self.policy.terminal_value != 0
            or self.policy.terminal_age_price != 0,
            is_window_held=r.is_window_held,
        )

    def cost_estimate(self, descriptor: Descriptor) -> CostEstimate:
        costs = self.costs
        fresh = costs.freshness(descriptor, self.now_ns) is Freshness.FRESH
        return CostEstimate(costs.estimate_ns(descriptor), fresh)

    def programs(self) -> Programs:
        return Programs(self.descriptors, self.state_descriptors)

    def statistics(self) -> SchedulerStatistics:
        return SchedulerStatistics(self.books.totals(), tuple(self.trace))

    # -- preemption --------------------------------------------------------------------

    def _occupying(self) -> Iterable[ScheduledRequest]:
        """Requests still running: live, or waiting for their terminal snapshot."""
        return (r for r in self.requests.values() if r.is_live or r.is_terminal_pending)

    def _holders(self) -> list[ScheduledRequest]:
        return [r for r in self.requests.values() if r.is_live and r.num_pages > 0]

    def preemption_victim(self, blocked: ScheduledPlan) -> PreemptionVictim | None:
        """Who gives way when the queue is empty and ``blocked`` cannot get its pages."""
        holders = self._holders()
        if sum(1 for _ in self._occupying()) < 2 or not holders:
            return None
        waiting = [
            r
            for lane in blocked.lanes
            if (r := self.requests.get(lane.handle)) is not None and r.is_live
        ]
        victim = max([*holders, *waiting], key=lambda r: (r.spec.admitted_ns, r.handle.slot))
        return PreemptionVictim(victim.handle, holds_pages=victim.num_pages > 0)

    def can_resume(self, num_prompt_tokens: int, max_output_tokens: int) -> bool:
        """Whether a preempted request, readmitted with this prompt (its original prompt
        plus its output so far) and output limit, fits now: a free slot, and pages for its
        whole length beside what live requests without pages will take for theirs and a
        page of growth per running holder (each may cross a page boundary on its next
        step); or nothing else runs."""
        if not self.pool.can_allocate_slot():
            return False
        if not any(True for _ in self._occupying()):
            return True
        pages_for = self.pool.pages_for
        need = pages_for(num_prompt_tokens + max_output_tokens + 1)
        unplaced = sum(
            pages_for(r.spec.num_prompt_tokens + max(0, r.remaining_output) + 1)
            for r in self.requests.values()
            if r.is_live and not r.num_pages
        )
        return need + unplaced + len(self._holders()) <= self.pool.num_free_pages
