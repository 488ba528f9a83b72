"""Where the engine loop meets checkpoint retention."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios import LaneRole, RequestHandle, ScheduledPlan, SchedulerProtocol
from ignition.runtime.loop.hooks import LoopHook
from ignition.runtime.loop.stats import EngineStats
from ignition.runtime.requests.request import GenerationRequest
from ignition.runtime.retention.captures import CaptureCosts
from ignition.runtime.retention.checkpoints import Admission, CheckpointCache
from ignition.runtime.retention.payoff import PrefillEstimate


class RetentionHooks(LoopHook):
    """``scheduler`` is read through a getter: the diagnostic direct scheduler can replace
    Helios after assembly, and it schedules no state operations (retention is then off)."""

    def __init__(
        self,
        scheduler: Callable[[], SchedulerProtocol],
        cache: CheckpointCache | None,
        stats: EngineStats,
    ) -> None:
        self._scheduler = scheduler
        self._helios = scheduler()
        self._cache = cache if cache is not None and cache.is_enabled else None
        self.stats = stats
        state = self._helios.programs().state
        self._snapshot = next((d for d in state if d.kind is GraphKind.SNAPSHOT), None)
        self._restore = next((d for d in state if d.kind is GraphKind.RESTORE), None)
        has_restore = any(d.kind is GraphKind.RESTORE for d in state)
        if self._snapshot is None or not has_restore:
            self._cache = None  # retention needs both prepared state programs

    @property
    def scheduler(self) -> SchedulerProtocol:
        return self._helios

    @property
    def cache(self) -> CheckpointCache | None:
        return self._cache if self._scheduler() is self._helios else None

    def can_admit(self) -> bool:
        """Admission (and its row arming) only when Helios has a free slot for it."""
        return self.cache is None or self._helios.can_admit()

    def _estimate_ns(self, d: Descriptor | None) -> float | None:
        if d is None:
            return None
        estimate = self.scheduler.cost_estimate(d).estimate_ns
        return float(estimate) if estimate > 0 else None

    def capture_costs(self) -> CaptureCosts:
        """Per-token prefill work, a split and a copy, from the measured graphs."""
        measured = []
        for d in self.scheduler.programs().inference:
            if d.kind in (GraphKind.PREFILL, GraphKind.MIXED):
                estimate = self._estimate_ns(d)
                capacity = d.token_capacity if d.kind is GraphKind.PREFILL else d.prefill_capacity
                if estimate is not None and capacity > 0:
                    measured.append((capacity, estimate))
        snapshot, restore = self._estimate_ns(self._snapshot), self._estimate_ns(self._restore)
        if not measured:
            return CaptureCosts(None, None, snapshot, None, restore)
        per_token = min(estimate / capacity for capacity, estimate in measured)
        split = min(estimate for _, estimate in measured)
        return CaptureCosts(per_token, split, snapshot, self._prefill_estimate(), restore)

    def _prefill_estimate(self) -> PrefillEstimate | None:
        """The pay-off rule's prefill times from the measured graphs."""
        for kind in (GraphKind.PREFILL, GraphKind.MIXED):
            best: dict[int, float] = {}
            for d in self.scheduler.programs().inference:
                estimate = self._estimate_ns(d) if d.kind is kind else None
                if estimate is not None:
                    c = d.token_capacity if kind is GraphKind.PREFILL else d.prefill_capacity
                    best[c] = min(best.get(c, estimate), estimate)
            estimate = PrefillEstimate.of(best.items())
            if estimate is not None:
                return estimate
        return None

    def admit(
        self, request: GenerationRequest, now_ns: int, prompt_ids: Sequence[int] | None = None
    ) -> Admission:
        """``prompt_ids``: what the model consumes (a resume replays its output)."""
        # A prompt with images is not its token ids alone (the pads look alike for any
        # image): it neither restores nor publishes a checkpoint.
        if self.cache is None or request.images is not None:
            return Admission(0, (), False)
        admission = self.cache.admit(
            request.request_id,
            request.prompt_ids if prompt_ids is None else prompt_ids,
            request.message_end_offsets,
            self.capture_costs(),
            now_ns,
            # Prompt logprobs score hidden states a restored prefix does not have.
            restore=request.sampling.prompt_logprobs is None,
            # A preempted request's resume restores the state its capture kept for it.
            mandatory=prompt_ids is not None,
            max_output=request.sampling.max_tokens,
        )
        return admission

    def admitted(self, admission: Admission) -> None:
        if self.cache is not None:
            tokens = admission.restore_tokens
            self.stats.record_prefix_cache(queries=1, hits=1 if tokens else 0, tokens=tokens)
            self._report_unprofitable()

    def _report_unprofitable(self) -> None:
        counters = self.cache.counters  # type: ignore[union-attr]
        self.stats.set_prefix_cache_unprofitable(
            counters.unprofitable_restores, counters.unprofitable_captures
        )

    def before_launch(self, plan: ScheduledPlan, live: Mapping[RequestHandle, object]) -> None:
        if self.cache is None or plan.kind not in (GraphKind.SNAPSHOT, GraphKind.RESTORE):
            return
        fresh = self._snapshot is not None and self.scheduler.cost_estimate(self._snapshot).is_fresh
        for lane in plan.lanes:
            request = live[lane.handle]
            if request.request.images is not None:  # type: ignore[attr-defined]
                continue  # never cached (see admit); vision windows use private rows
            owner = request.request.request_id  # type: ignore[attr-defined]
            request.state_ok = True  # type: ignore[attr-defined]
            if lane.role is LaneRole.RESTORE:
                row = self.cache.restore_row(owner)
            elif lane.role is LaneRole.SNAPSHOT:
                row = self.cache.capture_row(
                    owner, lane.checkpoint_tokens, fresh, self.scheduler.now_ns
                )
            else:
                row = self.cache.terminal_row(owner)
            request.state_row = row  # type: ignore[attr-defined]

    def after_frame(
        self, plan: ScheduledPlan, live: Mapping[RequestHandle, object], device_ns: int, ok: bool
    ) -> None:
        if self.cache is None:
            return
        for lane in plan.lanes:
            request = live.get(lane.handle)
            if request is None or request.request.images is not None:  # type: ignore[attr-defined]
                continue
            owner = request.request.request_id  # type: ignore[attr-defined]
            if lane.role is LaneRole.DECODE and ok:
                self.cache.earn_decode(owner, device_ns)
            elif lane.role is LaneRole.RESTORE:
                self.cache.restore_done(owner)
            elif lane.role.is_state_operation and request.state_row is not None:  # type: ignore[attr-defined]
                self.cache.copy_done(request.state_row, ok and request.state_ok)  # type: ignore[attr-defined]
            if lane.role.is_state_operation:
                request.state_row = None  # type: ignore[attr-defined]
        self.stats.set_prefix_cache_evictions(self.cache.num_evictions)

    def hold_for_terminal(self, live, now_ns: int) -> bool:
        """Whether a just-finished request waits for its terminal snapshot."""
        if self.cache is None:
            return False
        r = self.scheduler.request(live.handle)
        if r is None or not r.is_terminal_pending:
            return False
        if not r.terminal_has_value:
            # Terminal retirement is worth nothing: never hold a response for it.
            self.scheduler.retire_without_snapshot(live.handle)
            return False
        tokens = (*live.prompt_ids, *live.output_ids[:-1])
        armed = self.cache.arm_terminal(
            live.request.request_id, tokens, self._estimate_ns(self._snapshot), now_ns
        )
        self._report_unprofitable()
        if armed:
            return True
        self.scheduler.retire_without_snapshot(live.handle)
        return False

    def preempt(self, live, now_ns: int) -> bool:
        """Arm the snapshot row a preempted decoder resumes from; False: recompute it."""
        if self.cache is None or not live.output_ids:
            return False
        r = self.scheduler.request(live.handle)
        if r is None or not r.terminal_has_value:
            return False
        tokens = (*live.prompt_ids, *live.output_ids[:-1])
        return self.cache.arm_preemption(live.request.request_id, tokens, now_ns)

    def drop_terminal(self, live) -> None:
        """A request finished without waiting for a terminal snapshot (a stop string)."""
        if self.cache is None:
            return
        r = self.scheduler.request(live.handle)
        if r is not None and r.is_terminal_pending and live.pending_finish is None:
            self.scheduler.retire_without_snapshot(live.handle)

    def cancel(self, request: GenerationRequest) -> None:
        if self.cache is not None:
            self.cache.cancel(request.request_id)

    def release(self, request: GenerationRequest) -> None:
        if self.cache is not None:
            self.cache.release(request.request_id)

    def on_reap(self, live, current: bool) -> None:
        """A reaped handle's rows are free (a restart runs without retention)."""
        self.release(live.request)
