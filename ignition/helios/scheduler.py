"""The Helios scheduler: admission, planning, commit, completion and request resources.

``plan()`` changes no scheduling state (it only fills caches). A rejected call raises
SchedulerError and changes no state."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from ignition.components.catalog import Catalog
from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios.commit import Committing
from ignition.helios.completing import Completing
from ignition.helios.config import PolicyConfig, SpeculationMode
from ignition.helios.decide.policy import QUEUEABLE_KINDS, SCHEDULABLE_KINDS
from ignition.helios.decide.refresh import CreditLedger, ExecutionBooks
from ignition.helios.decide.selection import SelectionState, Selector
from ignition.helios.decide.sources import choose_source
from ignition.helios.decide.state_rows import STATE_KINDS
from ignition.helios.decide.utility import Candidate, Decision
from ignition.helios.fast.selector import Bounded
from ignition.helios.plans import (
    ExecutionClass,
    LaneWork,
    ScheduledPlan,
    SelectionReason,
    TraceEntry,
)
from ignition.helios.queries import SchedulerQueries
from ignition.helios.state.acceptance import (
    AcceptanceTracker,
    ConfidenceForecast,
    PrefixHistory,
    SourcePriors,
)
from ignition.helios.state.accounting import Publication
from ignition.helios.state.cost import CostModel, Freshness
from ignition.helios.state.queue import ExecutionQueue
from ignition.helios.state.requests import ScheduledRequest, ResourcePool
from ignition.helios.state_work import checkpoint_tokens
from ignition.helios.types import (
    DraftSource,
    RequestHandle,
    RequestSpec,
    Resources,
    SchedulerError,
)

EXPLORATION = (ExecutionClass.TIMING_REFRESH, ExecutionClass.ACCEPTANCE_LEARNING)


class Scheduler(Committing, Completing, SchedulerQueries):
    """Helios; satisfies :class:`ignition.helios.protocol.SchedulerProtocol` (its queries
    and preemption choice are in queries.py)."""

    def __init__(
        self,
        catalog: Catalog,
        policy: PolicyConfig | None = None,
        *,
        resources: Resources | None = None,
        speculation: SpeculationMode = SpeculationMode.ADAPTIVE,
        trace_capacity: int = 4096,
        selector: Selector | None = None,
    ) -> None:
        self.catalog = catalog
        self.descriptors = tuple(
            d
            for d in catalog.descriptors
            if d.kind in SCHEDULABLE_KINDS
            and not (speculation is SpeculationMode.FIXED and d.is_device_allocated)
        )
        self.state_descriptors = tuple(d for d in catalog.descriptors if d.kind in STATE_KINDS)
        # Terminal retirement and preemption need a snapshot program (vision ones do not).
        self._has_snapshot = any(d.kind is GraphKind.SNAPSHOT for d in self.state_descriptors)
        self._has_init = any(d.kind is GraphKind.INIT for d in self.state_descriptors)
        self.policy = policy or PolicyConfig()
        self.speculation = speculation
        self.books = ExecutionBooks()
        self.refresh: CreditLedger = self.books.refresh
        self.learning: CreditLedger = self.books.learning
        self.costs = CostModel(self.policy.estimate_ttl_ns)
        self.pool = ResourcePool(resources or Resources())
        self.requests: dict[RequestHandle, ScheduledRequest] = {}
        self.queue = ExecutionQueue()
        self.now_ns = 0
        self.trace: deque[TraceEntry] = deque(maxlen=trace_capacity)
        self._max_depth = max((d.proposal_depth for d in self.descriptors), default=0)
        # population priors per proposal source (a copy's acceptance is not the MTP head's)
        self._acceptance_priors = SourcePriors(
            self.policy.population_bounded_optimism, self.policy.population_bound_memory
        )
        self._forecast_priors = SourcePriors()
        self._last_fence = -1
        self._changes = 0
        self.waiting_for_slot = 0  # note_waiting
        self._no_probe_at: tuple[int, int] | None = None
        self._serve_seq = 0
        self._publishable: dict[RequestHandle, Publication] = {}
        self.selector: Selector = selector or Bounded()

    def configure_policy(self, policy: PolicyConfig) -> None:
        if self.requests:
            raise SchedulerError("configure_policy must precede admission")
        self.policy = policy
        self.costs.ttl_ns = policy.estimate_ttl_ns
        self._changes += 1

    def seed_cost(self, descriptor: Descriptor, duration_ns: int) -> None:
        """Preseed a measured cost (a measured synthetic catalog, a warm start)."""
        self.costs.seed(descriptor, duration_ns, self.now_ns)

    def admit(self, spec: RequestSpec) -> RequestHandle:
        handle = self.pool.allocate_slot()
        self.requests[handle] = ScheduledRequest(
            handle=handle,
            spec=spec,
            acceptance=AcceptanceTracker(self._acceptance_priors, spec.acceptance_prior),
            forecast=ConfidenceForecast(self._forecast_priors.of(spec.proposal_source)),
            is_initialized=not self._has_init or spec.restore_tokens > 0,
        )
        self._changes += 1
        return handle

    def limit_drafts(self, handle: RequestHandle, max_drafts: int | None) -> None:
        """The drafts the request's rounds may verify from now on (RequestSpec.max_drafts):
        a grammar-constrained request's supplied proposal, reported after each frame."""
        r = self._owned(handle)
        if r.spec.max_drafts != max_drafts:
            r.spec = replace(r.spec, max_drafts=max_drafts)
            self._changes += 1

    def cancel(self, handle: RequestHandle) -> None:
        """Stops selection now; pages and slot stay owned through the last submitted fence."""
        r = self._owned(handle)
        if r.is_cancelled:
            raise SchedulerError(f"{handle} is already cancelled")
        r.is_cancelled = True
        r.epoch += 1
        if not r.inflight:
            self._release(r)
        self._changes += 1
        self._note_idle()

    def retire_without_snapshot(self, handle: RequestHandle) -> None:
        """Drop a pending terminal capture the runtime cannot fund or place."""
        r = self._owned(handle)
        if not r.is_terminal_pending:
            raise SchedulerError(f"{handle} has no pending terminal retirement")
        r.terminal_since_ns = -1
        r.epoch += 1
        if r.is_releasable:
            self._release(r)
        self._changes += 1
        self._note_idle()

    def preempt(self, handle: RequestHandle) -> None:
        """Retire a resident request through a terminal snapshot without completing its
        response; its terminal age starts now. Only an idle request can be preempted."""
        r = self._owned(handle)
        if not r.is_live or r.inflight:
            raise SchedulerError(f"{handle}: only an idle live request can be preempted")
        if not self._has_snapshot:
            raise SchedulerError("preemption needs a prepared snapshot program")
        r.is_preempted = True
        r.terminal_since_ns = self.now_ns
        r.epoch += 1
        self._changes += 1

    def offer_drafts(
        self, handle: RequestHandle, offers: Mapping[DraftSource, int | None]
    ) -> DraftSource:
        """What each proposal source can supply for the request's next round (drafts;
        None: as deep as the programs hold), for a request Helios chooses sources for
        (RequestSpec.proposal_choices): picks the round's source (decide/sources.py),
        limits its drafts to that source's offer and returns the source."""
        r = self._owned(handle)
        choices = r.spec.proposal_choices
        if not choices:
            raise SchedulerError(
                f"offer_drafts({handle}): the request has no proposal_choices "
                f"(its source is {r.spec.proposal_source.name!r} for its life)"
            )
        unknown = sorted(str(s) for s in set(offers) - set(choices))
        if unknown:
            raise SchedulerError(
                f"offer_drafts({handle}): sources {unknown} are not among its choices "
                f"{[c.name for c in choices]}"
            )
        alpha = self.policy.adaptive_verification_alpha
        source = choose_source(r.acceptance, offers, choices, self._max_depth, alpha)
        offered = offers.get(source, 0)
        if (r.spec.proposal_source, r.spec.max_drafts) != (source, offered):
            r.spec = replace(r.spec, proposal_source=source, max_drafts=offered)
            self._changes += 1
        return source

    def note_waiting(self, count: int) -> None:
        """How many requests wait for a slot outside the scheduler (the caller's admission
        queue): the slot-pressure rule's input (decide/slot_pressure.py)."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise SchedulerError(f"note_waiting({count!r}): expected a nonnegative integer")
        if count != self.waiting_for_slot:
            self.waiting_for_slot = count
            if self.policy.slot_pressure > 0:
                self._changes += 1  # the prices change: a search that found nothing reruns

    def advance_to(self, now_ns: int) -> None:
        if now_ns < self.now_ns:
            raise SchedulerError(f"advance_to({now_ns}) moves time backwards from {self.now_ns}")
        self.now_ns = now_ns
        self.queue.note_time(now_ns)

    def _needs_feedback(
        self, d: Descriptor, freshness: Freshness, handles: Iterable[RequestHandle] = ()
    ) -> bool:
        """Unqueueable kinds, unknown or stale costs, and requests whose stops the host
        finds or whose grammar it follows (RequestSpec.host_stops, .grammar) need
        completion feedback; so do rounds that verify drafts the host copies from every
        token before them (RequestSpec.host_drafts, in a program with proposal depth)."""
        if d.kind not in QUEUEABLE_KINDS or freshness is not Freshness.FRESH:
            return True
        requests, drafts = self.requests, d.proposal_depth > 0
        return any(h in requests and requests[h].spec.needs_host_feedback(drafts) for h in handles)

    def own_freshness(self, c: Candidate) -> Freshness:
        """The timing state of ``c``'s own graph."""
        if c.descriptor.kind in STATE_KINDS:
            return self.costs.freshness(c.descriptor, self.now_ns)
        return c.freshness

    def plan(self) -> ScheduledPlan | None:
        return self.plan_with(self.selector)

    def plan_with(self, selector: Selector, *, record: bool = True) -> ScheduledPlan | None:
        """The plan ``selector`` makes now. ``record`` False changes nothing of the
        scheduler's (the differential test asks the definition beside plan())."""
        if self.queue.why_closed() is not None:
            return None
        state = self.selection_state()
        chosen = selector.select(state)
        if chosen is None:
            return None
        if chosen.no_probe and record:
            # Time alone only ages the same population: the search waits for a change.
            self._no_probe_at = (self._changes, self.costs.version)
        winner, cls = chosen.winner, chosen.execution_class
        # Exploration runs isolated: an empty window and completion feedback.
        needs = cls in EXPLORATION or self._needs_feedback(
            winner.descriptor, winner.freshness, (p.view.handle for p in winner.lanes)
        )
        if needs and not self.queue.is_empty:
            return None  # the winner waits for the window to drain; nothing displaces it
        return self._freeze(winner, chosen.decision, state.start_ns, needs, chosen.credit_ns, cls)

    def selection_state(self) -> SelectionState:
        """What a decision made now reads (helios/decide/selection.py)."""
        searched = (self._changes, self.costs.version)
        return SelectionState(
            requests=self.requests,
            queue=self.queue,
            descriptors=self.descriptors,
            state_descriptors=self.state_descriptors,
            costs=self.costs,
            policy=self.policy,
            speculation=self.speculation,
            max_depth=self._max_depth,
            now_ns=self.now_ns,
            start_ns=self.queue.expected_end_ns(self.now_ns),
            refresh_open=self.refresh.can_open(),
            refresh_balance_ns=self.refresh.balance_ns,
            learning_open=self.learning.can_open() and self._no_probe_at != searched,
            learning_balance_ns=self.learning.balance_ns,
            page_shortfall=self.page_shortfall,
            own_freshness=self.own_freshness,
            history_of=self._history_of,
            waiting_for_slot=self.waiting_for_slot,
        )

    def page_shortfall(self, c: Candidate) -> int:
        """KV pages ``c``'s commit would need beyond the free ones (0 or less: it fits)."""
        delta = 0
        for p in c.lanes:
            r = self.requests[p.view.handle]
            reserved = (
                checkpoint_tokens(r, p.role, restore_only=True)
                if p.role.is_state_operation
                else p.reserved_tokens
            )
            queued = sum(lane.reserved_tokens for lane in self._inflight_lanes(r))
            delta += self.pool.pages_for(r.context_tokens + queued + reserved) - r.num_pages
        return delta - self.pool.num_free_pages

    def _history_of(self, handle: RequestHandle) -> PrefixHistory:
        r = self.requests[handle]
        return r.acceptance.history(r.spec.proposal_source)

    def _freeze(
        self,
        c: Candidate,
        decision: Decision,
        start_ns: int,
        needs: bool,
        credit: float,
        cls: ExecutionClass,
    ) -> ScheduledPlan:
        """Lanes go in slot order: the dense active lane list the runtime packs."""
        prompt = c.lanes[c.prompt_row] if c.prompt_row >= 0 else None
        picks = sorted(c.lanes, key=lambda p: p.view.slot)
        lanes = tuple(
            LaneWork(
                handle=p.view.handle,
                epoch=p.view.epoch,
                role=p.role,
                num_prompt_tokens=p.num_prompt_tokens,
                query_length=p.query_length,
                expected_output_tokens=p.expected_output,
                expected_deliveries=p.expected_deliveries,
                max_advance_tokens=p.max_advance,
                reserved_tokens=p.reserved_tokens
                if not p.role.is_state_operation
                else checkpoint_tokens(self.requests[p.view.handle], p.role, restore_only=True),
                value=p.value,
                checkpoint_tokens=checkpoint_tokens(self.requests[p.view.handle], p.role),
                proposal_source=self.requests[p.view.handle].spec.proposal_source,
            )
            for p in picks
        )
        reason = {
            Freshness.UNKNOWN: SelectionReason.DISCOVERY,
            Freshness.STALE: SelectionReason.STALE,
            Freshness.FRESH: SelectionReason.ORDINARY,
        }[self.own_freshness(c)]
        return ScheduledPlan(
            descriptor=c.descriptor,
            lanes=lanes,
            prompt_row=-1 if prompt is None else picks.index(prompt),
            estimated_duration_ns=c.duration_ns,
            observation_age_ns=self.costs.observation_age_ns(c.descriptor, self.now_ns),
            value_rate=c.score,
            log_scale=decision.log_scale,
            reason=reason,
            requires_empty_window=needs,
            planned_start_ns=start_ns,
            decision_ns=self.now_ns,
            exploration_credit=credit,
            execution_class=cls,
        )

    def _owned(self, handle: RequestHandle) -> ScheduledRequest:
        r = self.requests.get(handle)
        if r is None or not self.pool.is_current(handle):
            raise SchedulerError(f"{handle} does not own its request slot")
        return r

    def _inflight_lanes(self, r: ScheduledRequest) -> list[LaneWork]:
        lanes = []
        for frame in self.queue.frames:
            lane = frame.lanes_by_handle.get(r.handle)  # = frame.plan.lane_of, built at commit
            if lane is not None:
                lanes.append(lane)
        return lanes

    def _pages_needed(self, r: ScheduledRequest, extra: Sequence[LaneWork] = ()) -> int:
        lanes = [*self._inflight_lanes(r), *extra]
        return self.pool.pages_for(r.context_tokens + sum(lane.reserved_tokens for lane in lanes))

    @property
    def num_inflight(self) -> int:
        return len(self.queue)
