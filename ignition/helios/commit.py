"""Helios's commit: a planned frame checked against ownership, epochs, pages, credit and
feedback dependencies, then queued. A rejected
commit raises SchedulerError (ResourceShortage for pages) and changes no state."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence

from ignition.components.descriptor import Descriptor
from ignition.helios.decide.refresh import ExecutionBooks
from ignition.helios.fast.projection import current_normalizers
from ignition.helios.plans import LaneRole, LaneWork, ScheduledPlan, TraceEntry
from ignition.helios.state.cost import CostModel, Freshness
from ignition.helios.state.queue import ExecutionQueue, Frame, Participant
from ignition.helios.state.requests import ScheduledRequest, ResourcePool
from ignition.helios.state_work import check_state_lane
from ignition.helios.trace import trace_entry
from ignition.helios.types import Fence, RequestHandle, ResourceShortage, SchedulerError


class Committing:
    """Mixed into :class:`ignition.helios.scheduler.Scheduler`, which owns these fields."""

    requests: dict[RequestHandle, ScheduledRequest]
    pool: ResourcePool
    queue: ExecutionQueue
    costs: CostModel
    books: ExecutionBooks
    descriptors: tuple[Descriptor, ...]
    state_descriptors: tuple[Descriptor, ...]
    trace: deque[TraceEntry]
    now_ns: int
    _last_fence: int
    _serve_seq: int
    _changes: int
    _needs_feedback: Callable[[Descriptor, Freshness, Iterable[RequestHandle]], bool]
    _inflight_lanes: Callable[[ScheduledRequest], list[LaneWork]]
    _pages_needed: Callable[[ScheduledRequest, Sequence[LaneWork]], int]

    def _check_lane(self, lane: LaneWork) -> int:
        """Validate one lane for commit; returns its page delta."""
        r = self.requests.get(lane.handle)
        if r is None or not self.pool.is_current(lane.handle):
            raise SchedulerError(f"{lane.handle} no longer owns its slot")
        if lane.role.is_state_operation:
            if r.epoch != lane.epoch:
                raise SchedulerError(
                    f"{lane.handle}: plan epoch {lane.epoch}, request is at {r.epoch}"
                )
            check_state_lane(r, lane, self._inflight_lanes(r))
            return self._pages_needed(r, [lane]) - r.num_pages
        if not r.is_live:
            raise SchedulerError(f"{lane.handle} is cancelled or finished")
        if r.epoch != lane.epoch:
            raise SchedulerError(f"{lane.handle}: plan epoch {lane.epoch}, request is at {r.epoch}")
        inflight = self._inflight_lanes(r)
        if lane.role is LaneRole.PROMPT:
            if r.is_decoder or inflight:
                raise SchedulerError(f"{lane.handle}: a prompt row needs an idle prompt request")
            if r.prompt_position + lane.num_prompt_tokens > r.spec.num_prompt_tokens:
                raise SchedulerError(f"{lane.handle}: prompt row runs past the prompt")
        else:
            if not r.is_decoder or any(x.role is LaneRole.PROMPT for x in inflight):
                raise SchedulerError(f"{lane.handle}: not a decoder yet (needs prefill feedback)")
            advance = sum(x.max_advance_tokens for x in inflight)
            if r.remaining_output - advance < 1:
                raise SchedulerError(f"{lane.handle}: queued work already reaches its output limit")
        return self._pages_needed(r, [lane]) - r.num_pages

    def commit(self, plan: ScheduledPlan, fence: Fence) -> None:
        d = plan.descriptor
        if fence.value <= self._last_fence:
            raise SchedulerError(f"fence {fence.value} is not after fence {self._last_fence}")
        if d not in self.descriptors and d not in self.state_descriptors:
            raise SchedulerError(f"{d.name} is not a schedulable program of this catalog")
        ledger = self.books.ledger_of(plan.execution_class)
        if ledger is not None and not ledger.can_open():
            raise SchedulerError(
                f"{d.name}: a {plan.execution_class.value} episode needs full credit and "
                "no open episode"
            )
        needs = plan.requires_empty_window or self._needs_feedback(
            d, self.costs.freshness(d, self.now_ns), (lane.handle for lane in plan.lanes)
        )
        if not self.queue.is_empty:
            closed = self.queue.why_closed()
            if closed is not None:
                raise SchedulerError(f"cannot queue {d.name}: {closed}")
            if needs:
                raise SchedulerError(f"{d.name} needs an empty window and completion feedback")
        handles = [lane.handle for lane in plan.lanes]
        if len(set(handles)) != len(handles):
            raise SchedulerError(f"{d.name}: a request appears in two lanes")
        deltas = [self._check_lane(lane) for lane in plan.lanes]
        if sum(deltas) > self.pool.num_free_pages:
            raise ResourceShortage(
                f"{d.name}: needs {sum(deltas)} KV pages, {self.pool.num_free_pages} free"
            )
        self.pool.adjust_pages(sum(deltas))
        self._serve_seq += 1
        for lane, delta in zip(plan.lanes, deltas, strict=True):
            r = self.requests[lane.handle]
            r.num_pages += delta
            r.epoch += 1
            r.last_served_seq = self._serve_seq
            r.inflight.append(fence.value)
        participants = tuple(
            Participant(r.handle, r.is_decoder) for r in self.requests.values() if r.is_live
        )
        frame = Frame(
            fence=fence.value,
            plan=plan,
            participants=participants,
            norms=current_normalizers(
                self.descriptors, self.costs, self.requests.values(), self.policy.newcomer_rule
            ),
            expected_start_ns=self.queue.expected_end_ns(self.now_ns),
            needs_feedback=needs,
        )
        self.queue.push(frame)
        if ledger is not None:
            ledger.open(fence.value)
        self.costs.note_attempt(d, self.now_ns)
        self._last_fence = fence.value
        self._changes += 1
        self.trace.append(trace_entry(plan, fence.value, self.now_ns))
