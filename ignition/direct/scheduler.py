"""The diagnostic scheduler of ``ignition debug-serve --direct``.

A plain :class:`ignition.helios.SchedulerProtocol`, to tell a runtime bug from a scheduling
decision: prompts first (the oldest, smallest fitting bucket; multi-lane prefill when two or
more fit), then decode rounds chosen by served lanes per estimated time (unmeasured first),
costs a 7/8 moving average. No proposals, mixed programs, queueing, prices or preemption.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ignition.components.catalog import Catalog
from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios import (
    CompletionReport,
    CostEstimate,
    DraftSource,
    ExecutionClass,
    Fence,
    GeneratedToken,
    LaneRole,
    LaneWork,
    PolicyConfig,
    PreemptionVictim,
    Programs,
    RequestHandle,
    RequestSpec,
    RequestView,
    ResourceUsage,
    Resources,
    ScheduledPlan,
    SchedulerError,
    SchedulerStatistics,
    SelectionReason,
    SpeculationMode,
)

STALE_AFTER_NS = 30_000_000_000


@dataclass
class MovingAverageCost:
    """7/8 moving average per program; zero (unknown) once 30 s pass unobserved."""

    estimate_ns: float = 0.0
    observed_ns: int = -1

    def value(self, now_ns: int) -> float:
        if self.observed_ns < 0 or now_ns - self.observed_ns > STALE_AFTER_NS:
            return 0.0
        return self.estimate_ns

    def observe(self, sample_ns: int, now_ns: int) -> None:
        if sample_ns <= 0:
            return
        fresh = self.value(now_ns) > 0
        self.estimate_ns = 7 / 8 * self.estimate_ns + sample_ns / 8 if fresh else float(sample_ns)
        self.observed_ns = now_ns


@dataclass
class _Request:
    handle: RequestHandle
    spec: RequestSpec
    admitted_seq: int
    prompt_position: int = 0
    num_output: int = 0
    is_finished: bool = False
    is_cancelled: bool = False
    epoch: int = 0
    inflight: bool = False

    @property
    def is_decoder(self) -> bool:
        return self.prompt_position >= self.spec.num_prompt_tokens

    @property
    def is_live(self) -> bool:
        return not (self.is_finished or self.is_cancelled)

    @property
    def remaining_output(self) -> int:
        return self.spec.max_output_tokens - self.num_output


@dataclass
class DirectScheduler:
    catalog: Catalog
    resources: Resources = field(default_factory=Resources)

    def __post_init__(self) -> None:
        self.prefills = sorted(
            (d for d in self.catalog.descriptors if d.kind is GraphKind.PREFILL),
            key=lambda d: d.token_capacity,
        )
        self.rounds = [d for d in self.catalog.descriptors if _is_decode_round(d)]
        if not self.prefills or not self.rounds:
            raise SchedulerError(
                f"{self.catalog.recipe}: the direct scheduler needs prefill programs and "
                "ordinary or width-one decode programs"
            )
        self.costs: dict[str, MovingAverageCost] = {}
        self.requests: dict[int, _Request] = {}
        self._generations = [0] * self.resources.num_request_slots
        self._seq = 0
        self.now_ns = 0
        self._inflight: tuple[Fence, ScheduledPlan] | None = None
        self._last_fence = -1

    # -- requests ------------------------------------------------------------------

    def admit(self, spec: RequestSpec) -> RequestHandle:
        free = [s for s in range(self.resources.num_request_slots) if s not in self.requests]
        if not free:
            raise SchedulerError("no free request slot")
        slot = free[0]
        self._generations[slot] += 1
        handle = RequestHandle(slot, self._generations[slot])
        self._seq += 1
        self.requests[slot] = _Request(handle, spec, self._seq)
        return handle

    def cancel(self, handle: RequestHandle) -> None:
        r = self._owned(handle)
        r.is_cancelled = True
        if not r.inflight:
            del self.requests[handle.slot]

    def limit_drafts(self, handle: RequestHandle, max_drafts: int | None) -> None:
        """Nothing to limit: every decode lane is planned one row wide."""
        self._owned(handle)

    def offer_drafts(
        self, handle: RequestHandle, offers: Mapping[DraftSource, int | None]
    ) -> DraftSource:
        """Nothing to choose: no lane verifies drafts; the request keeps its source."""
        return self._owned(handle).spec.proposal_source

    def note_waiting(self, count: int) -> None:
        """Ignored: the direct scheduler values no waiting request."""

    def advance_to(self, now_ns: int) -> None:
        if now_ns < self.now_ns:
            raise SchedulerError(f"advance_to({now_ns}) moves time backwards")
        self.now_ns = now_ns

    # -- planning ------------------------------------------------------------------

    def plan(self) -> ScheduledPlan | None:
        if self._inflight is not None:
            return None
        live = sorted(
            (r for r in self.requests.values() if r.is_live), key=lambda r: r.admitted_seq
        )
        prompting = [r for r in live if not r.is_decoder]
        if len(prompting) > 1 and (shared := self._plan_lanes(prompting)) is not None:
            return shared
        if prompting:
            return self._plan_prefill(prompting[0])
        decoders = [r for r in live if r.remaining_output > 0]
        return self._plan_decode(decoders) if decoders else None

    def _plan_lanes(self, prompting: list[_Request]) -> ScheduledPlan | None:
        """The oldest prompts whose rest fits one lane each of a multi-lane prefill, if
        two or more do (images keep the one-lane path: their spans are cut per chunk)."""

        def served(d: Descriptor) -> list[_Request]:
            lane_capacity = d.token_capacity // d.prompt_lanes
            taken = []
            for r in prompting[: d.prompt_lanes]:
                rest = r.spec.num_prompt_tokens - r.prompt_position
                if r.spec.image_spans or rest > lane_capacity:
                    break
                taken.append(r)
            return taken

        options = [(d, served(d)) for d in self.prefills if d.prompt_lanes > 1]
        options = [(d, taken) for d, taken in options if len(taken) > 1]
        if not options:
            return None
        d, taken = min(options, key=lambda o: (-len(o[1]), o[0].token_capacity))
        lanes = tuple(
            self._lane(r, LaneRole.PROMPT, r.spec.num_prompt_tokens - r.prompt_position, 0, 1)
            for r in taken
        )
        value = float(sum(lane.num_prompt_tokens for lane in lanes))
        return self._freeze(d, lanes, prompt_row=0, value=value)

    def _plan_prefill(self, r: _Request) -> ScheduledPlan:
        remaining = r.spec.num_prompt_tokens - r.prompt_position
        single = [d for d in self.prefills if d.prompt_lanes == 1]
        fitting = [d for d in single if d.token_capacity >= remaining]
        d = fitting[0] if fitting else single[-1]
        chunk = min(remaining, d.token_capacity)
        end = r.prompt_position + chunk
        for start, stop in r.spec.image_spans:  # an image's span is atomic: cut before it
            if start < end < stop and start > r.prompt_position:
                chunk = start - r.prompt_position
        completes = r.prompt_position + chunk >= r.spec.num_prompt_tokens
        lane = self._lane(r, LaneRole.PROMPT, chunk, 0, 1 if completes else 0)
        return self._freeze(d, (lane,), prompt_row=0, value=float(chunk))

    def _plan_decode(self, decoders: list[_Request]) -> ScheduledPlan:
        def score(d: Descriptor) -> tuple[int, float, int]:
            served = min(d.batch_capacity, len(decoders))
            cost = self._cost(d).value(self.now_ns)
            if cost == 0:
                return (1, served, -d.batch_capacity)  # unmeasured: explore, useful first
            return (0, served / cost, -d.batch_capacity)

        d = max(self.rounds, key=score)
        served = decoders[: d.batch_capacity]
        lanes = tuple(self._lane(r, LaneRole.DECODE, 0, 1, 1) for r in served)
        return self._freeze(d, lanes, prompt_row=-1, value=float(len(served)))

    def _lane(self, r: _Request, role: LaneRole, prompt: int, query: int, advance: int) -> LaneWork:
        return LaneWork(
            handle=r.handle,
            epoch=r.epoch,
            role=role,
            num_prompt_tokens=prompt,
            query_length=query,
            expected_output_tokens=float(advance),
            expected_deliveries=float(advance),
            max_advance_tokens=advance,
            reserved_tokens=prompt + query,
            value=float(prompt + advance),
            proposal_source=r.spec.proposal_source,
        )

    def _freeze(
        self, d: Descriptor, lanes: tuple[LaneWork, ...], prompt_row: int, value: float
    ) -> ScheduledPlan:
        cost = self._cost(d)
        estimate = int(cost.value(self.now_ns))
        return ScheduledPlan(
            descriptor=d,
            lanes=lanes,
            prompt_row=prompt_row,
            estimated_duration_ns=estimate,
            observation_age_ns=-1 if cost.observed_ns < 0 else self.now_ns - cost.observed_ns,
            value_rate=value / max(estimate, 1),
            log_scale=0.0,
            reason=SelectionReason.ORDINARY if estimate else SelectionReason.DISCOVERY,
            requires_empty_window=True,
            planned_start_ns=self.now_ns,
            decision_ns=self.now_ns,
            execution_class=ExecutionClass.ORDINARY if estimate else ExecutionClass.DISCOVERY,
        )

    def commit(self, plan: ScheduledPlan, fence: Fence) -> None:
        if self._inflight is not None:
            raise SchedulerError("the direct scheduler runs one frame at a time")
        if fence.value <= self._last_fence:
            raise SchedulerError(f"fence {fence.value} is not after {self._last_fence}")
        for lane in plan.lanes:
            r = self._owned(lane.handle)
            if r.epoch != lane.epoch or not r.is_live:
                raise SchedulerError(f"{lane.handle}: stale plan (epoch {lane.epoch})")
        for lane in plan.lanes:
            r = self.requests[lane.handle.slot]
            r.epoch += 1
            r.inflight = True
        self._inflight = (fence, plan)
        self._last_fence = fence.value

    # -- completion ----------------------------------------------------------------

    def complete(self, fence: Fence, report: CompletionReport) -> list[GeneratedToken]:
        """A sidecar or survival rows change nothing here: no speculation is priced."""
        records = report.records
        if self._inflight is None or self._inflight[0] != fence:
            raise SchedulerError(f"fence {fence.value} is not in flight")
        plan = self._inflight[1]
        if len(records) != len(plan.lanes):
            raise SchedulerError(f"{len(records)} records for {len(plan.lanes)} lanes")
        for lane, record in zip(plan.lanes, records, strict=True):
            if record.handle != lane.handle:
                raise SchedulerError(f"record for {record.handle} in {lane.handle}'s lane")
        self._inflight = None
        self._cost(plan.descriptor).observe(report.timing.device_ns, self.now_ns)
        tokens: list[GeneratedToken] = []
        for lane, record in zip(plan.lanes, records, strict=True):
            r = self.requests[lane.handle.slot]
            r.inflight = False
            r.epoch += 1
            if r.is_cancelled:
                del self.requests[lane.handle.slot]
                continue
            r.prompt_position += record.num_prompt_tokens
            ids = record.token_ids[: max(0, r.remaining_output)]
            first = r.num_output
            r.num_output += len(ids)
            context = r.prompt_position + r.num_output
            if record.is_finished or r.remaining_output <= 0 or context >= r.spec.context_capacity:
                r.is_finished = True
            tokens += [
                GeneratedToken(
                    r.handle, t, first + k, fence, is_last=r.is_finished and k == len(ids) - 1
                )
                for k, t in enumerate(ids)
            ]
            if r.is_finished:
                del self.requests[lane.handle.slot]
        return tokens

    def published_output(self, handle: RequestHandle, fence: Fence) -> None:
        """Publication needs no accounting here: there are no delivery prices."""

    # -- queries -------------------------------------------------------------------

    def can_admit(self) -> bool:
        return len(self.requests) < self.resources.num_request_slots

    def usage(self) -> ResourceUsage:
        """No page ledger: ``num_pages`` 0."""
        slots = self.resources.num_request_slots
        return ResourceUsage(slots, slots - len(self.requests), 0, 0, 0)

    def request(self, handle: RequestHandle) -> RequestView | None:
        r = self.requests.get(handle.slot)
        if r is None or r.handle != handle:
            return None
        return RequestView(
            handle, is_live=r.is_live, num_pages=0, remaining_output=r.remaining_output
        )

    def cost_estimate(self, descriptor: Descriptor) -> CostEstimate:
        value = self._cost(descriptor).value(self.now_ns)
        return CostEstimate(int(value), is_fresh=value > 0)

    def programs(self) -> Programs:
        return Programs((*self.prefills, *self.rounds))

    def statistics(self) -> SchedulerStatistics:
        return SchedulerStatistics()

    # -- request resources: nothing to retire or preempt ------------------------------

    def retire_without_snapshot(self, handle: RequestHandle) -> None:
        raise SchedulerError(f"{handle}: the direct scheduler retires nothing by snapshot")

    def preemption_victim(self, blocked: ScheduledPlan) -> PreemptionVictim | None:
        return None

    def preempt(self, handle: RequestHandle) -> None:
        raise SchedulerError(f"{handle}: the direct scheduler has no snapshot to preempt with")

    def can_resume(self, num_prompt_tokens: int, max_output_tokens: int) -> bool:
        return False

    # -- helpers -------------------------------------------------------------------

    def _owned(self, handle: RequestHandle) -> _Request:
        r = self.requests.get(handle.slot)
        if r is None or r.handle != handle:
            raise SchedulerError(f"{handle} does not own its slot")
        return r

    def _cost(self, d: Descriptor) -> MovingAverageCost:
        return self.costs.setdefault(d.name, MovingAverageCost())


def direct_scheduler(
    catalog: Catalog, policy: PolicyConfig, resources: Resources, speculation: SpeculationMode
) -> DirectScheduler:
    """A :data:`~ignition.helios.SchedulerFactory` for ``debug-serve --direct``:
    it has no service prices and never speculates, so policy and mode do not apply."""
    return DirectScheduler(catalog, resources)


def _is_decode_round(d: Descriptor) -> bool:
    if d.kind is GraphKind.DECODE:
        return True
    return d.kind is GraphKind.SPECULATIVE and d.token_capacity == 1 and d.proposal_depth == 0
