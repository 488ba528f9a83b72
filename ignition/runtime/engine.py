"""The engine loop: Helios plans, the worker executes, text is published.

One thread owns the scheduler and the worker. Each turn it drains the inbox
(admissions and cancellations from the HTTP threads), lets Helios plan, commits
and launches as long as the two-slot execution queue accepts queueable work,
then waits for the oldest frame, completes it, and publishes what became
visible. Launching before waiting is what overlaps host planning with device
execution: while a captured decode graph runs, the host already plans and
submits the next one.

Collaborators do the rest: the request table (runtime/request_table.py) holds every
request's state; admission.py readmits restarted and preempted requests and admits
arrivals; publication.py turns tokens into text and stop conditions; lifecycle.py ends
and continues requests; retention, vision windows, preemption, fault injection and frame
listeners meet the loop at the named points of runtime/loop_hooks.py. The worker seam
(its protocol and the frame result it reports) is runtime/frames.py.

Failures stay with the requests that caused them. A frame that cannot execute
ends its request when it ran alone; a frame shared by several requests cannot
say whose input broke it, so each of them restarts from its prompt plus the
output it already has, on probation: probation requests are readmitted one at a
time, and one that fails again (or fails alone) is the one that ends with an
error; the requests sharing that frame with it restart without being charged. A
request whose publication raises ends alone. Anything else that escapes a step
means the loop cannot continue: :meth:`Engine.fail_all` ends every open request
with an error so the caller can stop cleanly.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence

from ignition.helios import (
    CompletionRecord,
    CompletionReport,
    ConfidenceSidecar,
    ExecutionTiming,
    Fence,
    LaneRole,
    RequestHandle,
    ResourceShortage,
    ScheduledPlan,
    SchedulerError,
    SchedulerProtocol,
)
from ignition.runtime.admission import Admissions, check_token_ids, image_spans
from ignition.runtime.checkpoints import CheckpointCache
from ignition.runtime.detokenize import TextDecoder
from ignition.runtime.frames import FatalWorkerError, FrameResult, Worker, _Inflight
from ignition.runtime.lifecycle import Lifecycle
from ignition.runtime.loop_hooks import FaultHook, FrameListeners, LoopHookProtocol
from ignition.runtime.preemption import Preemption
from ignition.runtime.publication import Publisher, check_prompt_scoring
from ignition.runtime.request_table import LiveRequest, RequestTable, Sink
from ignition.runtime.requests import (
    EngineStoppedError,
    GenerationRequest,
    QueueFullError,
    RequestError,
)
from ignition.runtime.retention_engine import RetentionHooks
from ignition.runtime.stats import EngineStats
from ignition.runtime.window_engine import VisionWindowHooks

# Re-exported: the worker, the distributed ranks and tests import them from here.
__all__ = ["Engine", "FatalWorkerError", "LiveRequest", "check_token_ids", "image_spans"]

log = logging.getLogger("ignition.engine")
# A request restarted after a shared frame failed gets this many restarts at most.
MAX_RESTARTS = 2


class Engine:
    """Single-threaded core; ``submit`` and ``cancel`` are safe from other threads."""

    def __init__(
        self,
        scheduler: SchedulerProtocol,
        worker: Worker,
        decoder: TextDecoder,
        *,
        max_context_tokens: int,
        eos_token_ids: Sequence[int] = (),
        max_waiting: int = 64,
        stats: EngineStats | None = None,
        clock_ns: Callable[[], int] = time.monotonic_ns,
        num_slots: int | None = None,
        vocab_size: int | None = None,
        checkpoints: CheckpointCache | None = None,
        vision_windows: VisionWindowHooks | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.worker = worker
        self.decoder = decoder
        self.max_context_tokens = max_context_tokens
        self.eos_token_ids = frozenset(eos_token_ids)
        self.max_waiting = max_waiting
        self.num_slots = scheduler.usage().num_request_slots if num_slots is None else num_slots
        self.vocab_size = vocab_size
        # Structured outputs: the grammar compiler over the model's tokenizer
        # (runtime.grammar.GrammarCompiler), set by whoever opens the bundle; None: none.
        self.grammar = None
        self.stats = stats or EngineStats()
        self._clock_ns = clock_ns
        self._lock = threading.Lock()
        self._wakeup = threading.Condition(self._lock)
        self._inbox: collections.deque[tuple[GenerationRequest, Sink]] = collections.deque()
        self._cancels: set[str] = set()
        self._arrival_ns: dict[str, int] = {}
        self._inflight: collections.deque[_Inflight] = collections.deque()
        self._is_stopped = False
        self._next_fence = 0
        self.table = RequestTable()
        self.retention = RetentionHooks(lambda: self.scheduler, checkpoints, self.stats)
        self.vision_windows = vision_windows or VisionWindowHooks()
        self.lifecycle = Lifecycle(self.table, scheduler, self.retention, self.stats, clock_ns)
        self.preemption = Preemption(self.lifecycle)
        self._listeners = FrameListeners()
        self.hooks: list[LoopHookProtocol] = [
            self.retention,
            self.vision_windows,
            self.preemption,
            self._listeners,
        ]
        self.publisher = Publisher(self.lifecycle, self.hooks)
        self.admissions = Admissions(
            self.lifecycle, self.vision_windows, decoder, max_context_tokens, self._take_arrival
        )

    @property
    def live(self) -> dict[RequestHandle, LiveRequest]:
        return self.table.live

    @property
    def frame_listeners(self) -> list[Callable[[ScheduledPlan, FrameResult], None]]:
        """Told ``(plan, result)`` after each completed frame (loop_hooks.FrameListeners)."""
        return self._listeners.listeners

    @property
    def fault_hook(self) -> Callable[[str, LiveRequest], None] | None:
        """Test-only (runtime/faults.py): ``check(stage, request)`` at step and publish."""
        hook = next((h for h in self.hooks if isinstance(h, FaultHook)), None)
        return hook.check if hook is not None else None

    @fault_hook.setter
    def fault_hook(self, check: Callable[[str, LiveRequest], None] | None) -> None:
        self.hooks[:] = [h for h in self.hooks if not isinstance(h, FaultHook)]
        if check is not None:
            self.hooks.append(FaultHook(check))

    # -- called from other threads -------------------------------------------------

    def submit(self, request: GenerationRequest, sink: Sink) -> None:
        """Queue a request; raises QueueFullError when the waiting queue is full.

        Arrivals the loop has not picked up yet count as waiting only beyond the slots
        that are free for them: an idle server with four free slots takes four requests
        plus ``max_waiting`` more, however fast they arrive.
        """
        if len(request.prompt_ids) + 1 > self.max_context_tokens:
            raise RequestError(
                f"the prompt has {len(request.prompt_ids)} tokens; the context is "
                f"{self.max_context_tokens}"
            )
        if self.vocab_size is not None:
            check_token_ids(request.prompt_ids, self.vocab_size)
        if request.sampling.prompt_logprobs is not None:
            check_prompt_scoring(request, self.worker)
        with self._wakeup:
            if self._is_stopped:
                raise EngineStoppedError("the engine loop has stopped; see the server log")
            free = max(0, self.num_slots - self.table.num_held)
            if len(self._inbox) + len(self.table.waiting) >= self.max_waiting + free:
                raise QueueFullError(
                    f"{self.max_waiting} requests are already waiting for a slot; retry later"
                )
            self._inbox.append((request, sink))
            self._arrival_ns[request.request_id] = self._clock_ns()
            self._wakeup.notify()

    def cancel(self, request_id: str) -> None:
        with self._wakeup:
            self._cancels.add(request_id)
            self._wakeup.notify()

    def wait_for_work(self, timeout_s: float) -> None:
        with self._wakeup:
            if not (self._inbox or self._cancels or self.table.has_open):
                self._wakeup.wait(timeout_s)

    # -- the loop ------------------------------------------------------------------

    @property
    def has_work(self) -> bool:
        return bool(self.table.has_open or self._inflight or self._inbox)

    def step(self) -> bool:
        """One turn: plan -> commit -> launch while the queue has room, then wait for the
        oldest frame -> complete it -> publish; returns whether anything progressed."""
        progressed = self._drain_inbox()
        self.admissions.admit()
        live_now = list(self.table.live.values())
        for hook in self.hooks:
            hook.on_step(live_now)
        self.scheduler.advance_to(self.lifecycle.now_ns())
        while len(self._inflight) < 2:
            plan = self.scheduler.plan()
            if plan is None:
                break
            fence = Fence(self._next_fence)
            try:
                self.scheduler.commit(plan, fence)
            except ResourceShortage:
                if not self._inflight:  # nothing in flight will free pages: preempt
                    progressed = any([hook.on_shortage(plan) for hook in self.hooks]) or progressed
                break
            except SchedulerError:
                break  # needs an empty window: drain the queue, then replan
            self._next_fence += 1
            self._launch(plan, fence)
            progressed = True
        if self._inflight:
            self._complete_oldest()
            progressed = True
        self._reap()
        self._record_usage()
        return progressed

    def _launch(self, plan: ScheduledPlan, fence: Fence) -> None:
        self._await_grammar_feedback(plan)
        try:
            for hook in self.hooks:
                hook.before_launch(plan, self.table.live)
            pending = self.worker.launch(plan, fence, self.table.live)
        except Exception as err:  # a failed frame fails its requests, not the server
            if isinstance(err, FatalWorkerError):
                raise
            self._fail_frame(fence, plan, err)
        else:
            self._inflight.append(_Inflight(fence, plan, pending))

    def _complete_oldest(self) -> None:
        """Wait for the oldest frame, complete it in Helios, publish what became visible."""
        frame = self._inflight.popleft()
        try:
            result = self.worker.wait(frame.pending)
        except Exception as err:
            if isinstance(err, FatalWorkerError):
                raise
            self._fail_frame(frame.fence, frame.plan, err)
            return
        self.scheduler.advance_to(self.lifecycle.now_ns())
        self._fail_rows(result.failed)
        report = CompletionReport(result.records, result.timing, result.sidecar, result.survival)
        try:
            tokens = self.scheduler.complete(frame.fence, report)
        except SchedulerError as err:  # malformed records: Helios changed nothing
            self._fail_frame(frame.fence, frame.plan, err)
            return
        plan, live = frame.plan, self.table.live
        self.stats.record_execution(
            plan.descriptor.kind.value, result.timing.device_ns, plan.execution_class.value
        )
        for hook in self.hooks:
            hook.after_frame(plan, live, result.timing.device_ns, True)
        for request in self.vision_windows.held_after(plan, live, self.scheduler):
            self._next_window(request)
        self._record_tokens(result)
        self.publisher.keep_prompt_scores(result.prompt_logprobs)
        self.publisher.publish(frame.fence, tokens, result.records, result.logprobs)
        for handle in self.retention.retired(plan, live):
            request = live[handle]
            if request.preempting:
                self.preemption.retired(request)
            elif not request.is_done and request.pending_finish is not None:
                self.lifecycle.finish(request, request.pending_finish, notify_scheduler=False)
        for hook in self.hooks:
            hook.on_frame(plan, result)

    def _record_tokens(self, result: FrameResult) -> None:
        for i, offered in enumerate(result.num_offered_drafts):
            if offered > 0:
                accepted = max(0, len(result.records[i].token_ids) - 1)
                self.stats.record_speculation(offered, accepted)
        for record in result.records:
            live = self.table.live.get(record.handle)
            if live is not None and record.num_prompt_tokens:
                live.num_prompt_consumed += record.num_prompt_tokens
                self.stats.record_tokens(record.num_prompt_tokens, 0)

    def _await_grammar_feedback(self, plan: ScheduledPlan) -> None:
        """Complete the frames in flight that hold a constrained request of ``plan`` before
        launching it: its grammar mask needs every token before the position it samples on
        the host (runtime/grammar.py; the design's completion-feedback rule for grammars).
        Completion runs in fence order; the committed plan is launched right after."""
        constrained = [
            lane.handle
            for lane in plan.lanes
            if (live := self.table.live.get(lane.handle)) is not None
            and live.request.sampling.grammar is not None
        ]
        while constrained and any(self._is_inflight(h) for h in constrained):
            self._complete_oldest()

    def _record_usage(self) -> None:
        table = self.table
        running = sum(1 for live in table.open_live() if not live.preempting)
        preempted = len(table.resuming) + self.preemption.num_preempting
        waiting = len(table.waiting) + len(table.restarting)
        self.stats.set_queue(running=running, waiting=waiting, preempted=preempted)
        usage = self.scheduler.usage()
        if usage.num_pages > 0:  # a scheduler with a page ledger (Helios)
            used = max(0, usage.num_pages - usage.num_free_pages)
            self.stats.set_usage(table.num_occupied, self.num_slots, used, usage.num_pages)

    def run_until_idle(self, max_steps: int = 1_000_000) -> None:
        """Drive the loop until every request has finished (tests, ``generate``)."""
        for _ in range(max_steps):
            if not self.has_work:
                return
            self.step()
        raise RuntimeError(f"the engine did not go idle within {max_steps} steps")

    # -- arrivals, cancellations, failures -------------------------------------------

    def _drain_inbox(self) -> bool:
        with self._lock:
            arrivals = list(self._inbox)
            self._inbox.clear()
            cancels = set(self._cancels)
            self._cancels.clear()
        for request, sink in arrivals:
            self.table.arrive(request, sink)
        for request_id in cancels:
            self._cancel(request_id)
        return bool(arrivals or cancels)

    def _take_arrival(self, request_id: str) -> int:
        with self._lock:
            return self._arrival_ns.pop(request_id, self._clock_ns())

    def _cancel(self, request_id: str) -> None:
        table, lifecycle = self.table, self.lifecycle
        waiting = table.drop_waiting(request_id)
        if waiting is not None:
            request, sink = waiting
            with self._lock:
                self._arrival_ns.pop(request_id, None)
            lifecycle.end_unadmitted(sink, len(request.prompt_ids), 0, "abort")
            return
        for old in table.restarting:
            if old.request.request_id == request_id:
                table.finish(old)
                n, m = len(old.request.prompt_ids), len(old.output_ids)
                lifecycle.end_unadmitted(old.sink, n, m, "abort")
                return
        for old in table.resuming:  # a client left while its request waited to resume
            if old.request.request_id == request_id:
                lifecycle.finish(old, "abort", notify_scheduler=False)
                return
        live = table.by_id(request_id)
        if live is not None and not live.is_done:
            lifecycle.finish(live, "abort", notify_scheduler=True)

    def _fail_rows(self, failed: dict[RequestHandle, str]) -> None:
        """End the requests whose rows the worker reported failed (a non-finite sampling
        distribution), before the frame completes: cancelled first, Helios accepts their
        token-less records, and the frame's other requests go on untouched."""
        for handle, message in failed.items():
            live = self.table.live.get(handle)
            if live is not None and not live.is_done:
                log.warning("request %s: %s", live.request.request_id, message)
                self.lifecycle.finish(live, "error", notify_scheduler=True, error=message)

    def _next_window(self, live: LiveRequest) -> None:
        """Rebind a request held at its window boundary to a fresh generation, which
        restores the boundary from the private row (runtime/window_engine.py)."""
        old = live.handle
        self.scheduler.cancel(old)  # idle: its slot and pages are released now
        self.worker.release(old)
        handle = self.scheduler.admit(self.vision_windows.next_spec(live))
        self.worker.carry_history(old, handle)  # penalties see every window's tokens
        self.table.rebind(live, handle)

    def _fail_frame(self, fence: Fence, plan: ScheduledPlan, err: Exception) -> None:
        """Settle the requests of a frame that could not execute, then retire the frame.

        A request that ran alone, was already on probation or has used its restarts ends
        with the error; the others restart (see the module docstring). Either way they are
        cancelled first, so Helios accepts records without tokens for them; zero device
        time records no cost observation.
        """
        message = f"{plan.descriptor.name} failed: {type(err).__name__}: {err}"
        log.error("fence %d: %s", fence.value, message, exc_info=err)
        for hook in self.hooks:
            hook.after_frame(plan, self.table.live, 0, False)
        involved = [
            live
            for lane in plan.lanes
            if (live := self.table.live.get(lane.handle)) is not None and not live.is_done
        ]
        # A request on probation already failed once in a shared frame: when it is in
        # this one too it is the suspect, and the others restart without being charged
        # (otherwise one bad input could exhaust an innocent's restarts).
        suspect = any(live.probation_output is not None for live in involved)
        for live in involved:
            if live.preempting:  # its preemption snapshot failed: recompute it instead
                self.preemption.failed(live)
                continue
            if suspect:
                guilty = live.probation_output is not None
            else:
                guilty = len(involved) == 1 or live.num_restarts >= MAX_RESTARTS
            live.restart_charged = not suspect
            if guilty:
                self.lifecycle.finish(live, "error", notify_scheduler=True, error=message)
            else:
                self.table.restart(live)
                self.lifecycle.cancel_in_scheduler(live.handle)
                # The restart runs without retention: its copies are suppressed and its
                # rows freed when the old handle is reaped.
                self.retention.cancel(live.request)
        records = tuple(
            CompletionRecord(
                lane.handle, lane.num_prompt_tokens if lane.role is LaneRole.PROMPT else 0
            )
            for lane in plan.lanes
        )
        d, sidecar = plan.descriptor, None
        if d.is_device_allocated and d.proposal_depth > 0:
            empty = tuple((0.0,) * d.proposal_depth for _ in range(d.batch_capacity))
            sidecar = ConfidenceSidecar(planes=(empty, empty))
        self.scheduler.complete(fence, CompletionReport(records, ExecutionTiming(0), sidecar))

    def _reap(self) -> None:
        """Free worker state of finished requests once no submitted frame uses them."""
        for live in [live for live in self.table.live.values() if live.is_done]:
            if not self._is_inflight(live.handle):
                self.worker.release(live.handle)
                self.retention.release(live.request)
                if self.table.reap(live):
                    self.vision_windows.release(live.request)  # not while a restart runs

    def _is_inflight(self, handle: RequestHandle) -> bool:
        return any(f.plan.lane_of(handle) is not None for f in self._inflight)

    def fail_all(self, message: str) -> None:
        """End every open request with ``message`` and refuse new ones.

        Called when a step raised outside any frame or request: the scheduler's state
        can no longer be trusted, so nothing is cancelled in it; clients get a final
        chunk with ``finish_reason`` ``error`` instead of a cut stream.
        """
        with self._lock:
            self._is_stopped = True
            arrivals = list(self._inbox)
            self._inbox.clear()
            self._arrival_ns.clear()
        waiting, open_requests = self.table.close()
        for request, sink in [*waiting, *arrivals]:
            self.lifecycle.end_unadmitted(sink, len(request.prompt_ids), 0, "error", message)
        for live in open_requests:
            n, m = len(live.request.prompt_ids), len(live.output_ids)
            self.lifecycle.end_unadmitted(live.sink, n, m, "error", message)
