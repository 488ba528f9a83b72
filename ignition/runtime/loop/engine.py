"""The engine loop: Helios plans, the worker executes, text is published."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass

from ignition.helios import (
    CompletionReport,
    Fence,
    GeneratedToken,
    RequestHandle,
    ResourceShortage,
    ScheduledPlan,
    SchedulerError,
    SchedulerProtocol,
)
from ignition.runtime.executors.frames import FatalWorkerError, FrameResult, Worker
from ignition.runtime.grammar import GrammarCompiler, LazyGrammarCompiler
from ignition.runtime.loop.admission import Admissions, check_request
from ignition.runtime.loop.failures import FrameFailures
from ignition.runtime.loop.hooks import FaultHook, FrameListeners, LoopHooks
from ignition.runtime.loop.inbox import Inbox
from ignition.runtime.loop.lifecycle import Lifecycle
from ignition.runtime.loop.preemption import Preemption
from ignition.runtime.loop.publication import HeldFinishes, Publisher
from ignition.runtime.loop.retention_hooks import RetentionHooks
from ignition.runtime.loop.second_slot import SecondSlot
from ignition.runtime.loop.stats import EngineStats
from ignition.runtime.loop.window_hooks import VisionWindowHooks
from ignition.runtime.requests.detokenize import TextDecoder
from ignition.runtime.requests.request import GenerationRequest
from ignition.runtime.requests.table import LiveRequest, RequestTable, Sink
from ignition.runtime.retention.checkpoints import CheckpointCache


@dataclass
class Inflight:
    """A launched frame the engine has not yet completed."""

    fence: Fence
    plan: ScheduledPlan
    pending: object
    # Its launch raised: its requests are settled, and Helios retires it in its turn.
    failed_at_launch: bool = False
    # When it should end: its start (its launch, or the end seen of the frame ahead of it)
    # plus Helios's estimate; what the just-in-time second slot waits against.
    expected_end_ns: int = 0


class Engine:
    """Single-threaded core; ``submit`` and ``cancel`` are safe from other threads."""

    def __init__(
        self,
        scheduler: SchedulerProtocol,
        worker: Worker,
        decoder: TextDecoder,
        *,
        max_context_tokens: int,
        max_waiting: int = 64,
        stats: EngineStats | None = None,
        clock_ns: Callable[[], int] = time.monotonic_ns,
        num_slots: int | None = None,
        vocab_size: int | None = None,
        checkpoints: CheckpointCache | None = None,
        vision_windows: VisionWindowHooks | None = None,
        grammar: GrammarCompiler | LazyGrammarCompiler | None = None,
        queue_lead_ns: int | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.worker = worker
        self.decoder = decoder
        self.max_context_tokens = max_context_tokens
        self.num_slots = scheduler.usage().num_request_slots if num_slots is None else num_slots
        self.vocab_size = vocab_size
        # Structured outputs: the grammar compiler over the model's tokenizer; None: none.
        self.grammar = grammar
        self.stats = stats or EngineStats()
        self._inflight: collections.deque[Inflight] = collections.deque()
        self._next_fence = 0
        self.table = RequestTable()
        self.inbox = Inbox(self.table, self.num_slots, max_waiting, clock_ns)
        self.retention = RetentionHooks(lambda: self.scheduler, checkpoints, self.stats)
        self.vision_windows = vision_windows or VisionWindowHooks()
        self.lifecycle = Lifecycle(self.table, scheduler, self.retention, self.stats, clock_ns)
        self.preemption = Preemption(self.lifecycle)
        self._listeners = FrameListeners()
        held = HeldFinishes(self.lifecycle)
        hooks = [self.retention, self.vision_windows, self.preemption, held, self._listeners]
        self.hooks = LoopHooks(hooks)
        self.publisher = Publisher(self.lifecycle, self.hooks)
        self.failures = FrameFailures(self.lifecycle, self.preemption, self.hooks)
        self.admissions = Admissions(
            self.lifecycle, self.vision_windows, decoder, max_context_tokens, self.inbox.arrival_ns
        )
        # RuntimeOptions.queue_lead_ms: None fills the second frame slot at once
        self._second_slot = (
            None if queue_lead_ns is None else SecondSlot(queue_lead_ns, self.lifecycle.now_ns)
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
        """Test-only (runtime/loop/faults.py): ``check(stage, request)`` at step and publish."""
        hook = next((h for h in self.hooks if isinstance(h, FaultHook)), None)
        return hook.check if hook is not None else None

    @fault_hook.setter
    def fault_hook(self, check: Callable[[str, LiveRequest], None] | None) -> None:
        self.hooks.replace(FaultHook, FaultHook(check) if check is not None else None)

    def submit(self, request: GenerationRequest, sink: Sink) -> None:
        """Queue a request; raises RequestError or QueueFullError."""
        check_request(request, self.max_context_tokens, self.vocab_size, self.worker)
        self.inbox.put(request, sink)

    def cancel(self, request_id: str) -> None:
        self.inbox.cancel(request_id)

    def wait_for_work(self, timeout_s: float) -> None:
        self.inbox.wait(timeout_s)

    @property
    def has_work(self) -> bool:
        return bool(self.table.has_open or self._inflight or self.inbox)

    def step(self) -> bool:
        """One turn: plan, commit, launch; wait, complete, publish; True if anything progressed."""
        progressed = self._take_arrivals()
        if self._hold_second_slot():
            progressed = self._take_arrivals() or progressed
        while len(self._inflight) < 2:
            plan = self.scheduler.plan()
            if plan is None:
                break
            fence = Fence(self._next_fence)
            try:
                self.scheduler.commit(plan, fence)
            except ResourceShortage:
                if not self._inflight:  # nothing in flight will free pages: preempt
                    progressed = any([act(plan) for act in self.hooks.on_shortage]) or progressed
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
        self.lifecycle.report_usage(self.num_slots)
        return progressed

    def _take_arrivals(self) -> bool:
        """Arrivals and cancellations into the table, admissions into Helios, its clock now."""
        progressed = self._drain_inbox()
        self.admissions.admit()
        if self.hooks.on_step:
            live_now = list(self.table.live.values())
            for on_step in self.hooks.on_step:
                on_step(live_now)
        self.scheduler.advance_to(self.lifecycle.now_ns())
        return progressed

    def _hold_second_slot(self) -> bool:
        """With the just-in-time slot and one frame in flight on a worker that can tell its
        end, wait before planning the next (loop/second_slot.py); True if it waited (a frame
        that already ended, as every CPU frame has at launch, is not waited for)."""
        if self._second_slot is None or len(self._inflight) != 1:
            return False
        is_done = getattr(self.worker, "is_done", None)
        if is_done is None:
            return False
        frame = self._inflight[0]
        if frame.failed_at_launch or is_done(frame.pending):
            return False
        self._second_slot.hold(
            frame.expected_end_ns, lambda: is_done(frame.pending), self.inbox.wait_for_arrival
        )
        return True

    def _launch(self, plan: ScheduledPlan, fence: Fence) -> None:
        self._await_grammar_feedback(plan)
        try:
            for before_launch in self.hooks.before_launch:
                before_launch(plan, self.table.live)
            pending = self.worker.launch(plan, fence, self.table.live)
        except Exception as err:  # a failed frame fails its requests, not the server
            if isinstance(err, FatalWorkerError):
                raise
            if not self._inflight:
                self.failures.fail_frame(fence, plan, err)
                return
            # Older frames are in flight: Helios completes fences in order, so this one is
            # retired in its turn; its requests are settled now (no later plan serves them).
            self.failures.settle(fence, plan, err)
            self._inflight.append(Inflight(fence, plan, None, failed_at_launch=True))
        else:
            ahead = self._inflight[-1].expected_end_ns if self._inflight else 0
            start = max(self.lifecycle.now_ns(), ahead)
            self._inflight.append(
                Inflight(fence, plan, pending, expected_end_ns=start + plan.estimated_duration_ns)
            )

    def _complete_oldest(self) -> None:
        """Wait for the oldest frame, complete it in Helios, publish what became visible."""
        frame = self._inflight.popleft()
        if frame.failed_at_launch:
            self.failures.retire(frame.fence, frame.plan)
            return
        result = self._wait(frame)
        if self._inflight:  # the next frame started when this one ended, as seen now
            behind = self._inflight[0]
            behind.expected_end_ns = self.lifecycle.now_ns() + behind.plan.estimated_duration_ns
        tokens = self._complete(frame, result) if result is not None else None
        if result is not None and tokens is not None:
            self._publish(frame, result, tokens)

    def _wait(self, frame: Inflight) -> FrameResult | None:
        """The frame's result; None: it failed, and its requests are settled."""
        try:
            return self.worker.wait(frame.pending)
        except Exception as err:
            if isinstance(err, FatalWorkerError):
                raise
            self.failures.fail_frame(frame.fence, frame.plan, err)
            return None

    def _complete(self, frame: Inflight, result: FrameResult) -> list[GeneratedToken] | None:
        """Helios's tokens for the frame; None: it refused the records (and changed nothing)."""
        self.scheduler.advance_to(self.lifecycle.now_ns())
        self.failures.fail_rows(result.failed)
        report = CompletionReport(result.records, result.timing, result.sidecar, result.survival)
        try:
            tokens = self.scheduler.complete(frame.fence, report)
        except SchedulerError as err:  # malformed records: Helios changed nothing
            self.failures.fail_frame(frame.fence, frame.plan, err)
            return None
        plan, device_ns = frame.plan, result.timing.device_ns
        self.stats.record_execution(
            plan.descriptor.kind.value, device_ns, plan.execution_class.value
        )
        for after_frame in self.hooks.after_frame:
            after_frame(plan, self.table.live, device_ns, True)
        for after_complete in self.hooks.after_complete:
            after_complete(plan, self)
        return tokens

    def _publish(self, frame: Inflight, result: FrameResult, tokens: list[GeneratedToken]) -> None:
        self.publisher.record_frame(frame.plan, result)
        self.publisher.publish(frame.fence, tokens, result.records, result.logprobs)
        for after_publish in self.hooks.after_publish:
            after_publish(frame.plan, self.table.live)
        for on_frame in self.hooks.on_frame:
            on_frame(frame.plan, result)

    def _await_grammar_feedback(self, plan: ScheduledPlan) -> None:
        """Before launching ``plan``, complete the frames holding its constrained requests."""
        constrained = [
            lane.handle
            for lane in plan.lanes
            if (live := self.table.live.get(lane.handle)) is not None
            and live.request.sampling.grammar is not None
        ]
        while constrained and any(self._is_inflight(h) for h in constrained):
            self._complete_oldest()

    def run_until_idle(self, max_steps: int = 1_000_000) -> None:
        """Drive the loop until every request has finished (tests, ``generate``)."""
        for _ in range(max_steps):
            if not self.has_work:
                return
            self.step()
        raise RuntimeError(f"the engine did not go idle within {max_steps} steps")

    def _drain_inbox(self) -> bool:
        arrivals, cancels = self.inbox.drain()
        for request, sink in arrivals:
            self.table.arrive(request, sink)
        for request_id in cancels:
            if self.lifecycle.abort(request_id):  # it was waiting: forget its arrival
                self.inbox.forget(request_id)
        return bool(arrivals or cancels)

    def _reap(self) -> None:
        """Free worker state of finished requests once no submitted frame uses them."""
        for live in [live for live in self.table.live.values() if live.is_done]:
            if not self._is_inflight(live.handle):
                self.worker.release(live.handle)
                current = self.table.reap(live)
                for on_reap in self.hooks.on_reap:
                    on_reap(live, current)

    def _is_inflight(self, handle: RequestHandle) -> bool:
        return any(f.plan.lane_of(handle) is not None for f in self._inflight)

    def fail_all(self, message: str) -> None:
        """End every open request with ``message`` and refuse new ones."""
        arrivals = self.inbox.close()
        waiting, open_requests = self.table.close()
        for request, sink in [*waiting, *arrivals]:
            self.lifecycle.end_unadmitted(sink, len(request.prompt_ids), 0, "error", message)
        for live in open_requests:
            n, m = len(live.request.prompt_ids), len(live.output_ids)
            self.lifecycle.end_unadmitted(live.sink, n, m, "error", message)
