"""The engine loop: Helios plans, the worker executes, text is published.

One thread owns the scheduler and the worker. Each turn it drains the inbox
(admissions and cancellations from the HTTP threads), lets Helios plan, commits
and launches as long as the two-slot execution queue accepts queueable work,
then waits for the oldest frame, completes it, and publishes what became
visible. Launching before waiting is what overlaps host planning with device
execution: while a captured decode graph runs, the host already plans and
submits the next one.

Publication (runtime/publication.py) is where stop strings and detokenization
meet the scheduler: only text actually shown counts as a delivery, and a stop
found in the text ends the request through ``cancel``. The worker seam (its
protocol and the frame result it reports) is runtime/frames.py.

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
from dataclasses import dataclass, field

from ignition.helios import (
    CompletionRecord,
    CompletionReport,
    ConfidenceSidecar,
    ExecutionTiming,
    Fence,
    GeneratedToken,
    LaneRole,
    RequestHandle,
    RequestSpec,
    ResourceShortage,
    ScheduledPlan,
    SchedulerError,
    SchedulerProtocol,
    VisionWindow,
)
from ignition.runtime.checkpoints import CheckpointCache
from ignition.runtime.detokenize import IncrementalDetokenizer, TextDecoder
from ignition.runtime.frames import FrameResult, Worker, _Inflight
from ignition.runtime.grammar import draft_limit
from ignition.runtime.preemption import Preemption
from ignition.runtime.publication import Publication, Sink, _deliver, check_prompt_scoring
from ignition.runtime.requests import (
    EngineStoppedError,
    GenerationRequest,
    PromptLogprob,
    QueueFullError,
    RequestError,
    StreamChunk,
)
from ignition.runtime.retention_engine import RetentionHooks
from ignition.runtime.stats import EngineStats
from ignition.runtime.window_engine import VisionWindowHooks

log = logging.getLogger("ignition.engine")
# A request restarted after a shared frame failed gets this many restarts at most.
MAX_RESTARTS = 2


class FatalWorkerError(RuntimeError):
    """A worker failure after which no frame can run (a tensor-parallel group whose
    collectives are out of step): the loop stops, as for any error outside a frame."""


@dataclass
class LiveRequest:
    """Everything the engine and the worker know about one admitted request."""

    request: GenerationRequest
    handle: RequestHandle
    sink: Sink
    detokenizer: IncrementalDetokenizer
    output_ids: list[int] = field(default_factory=list)
    num_prompt_consumed: int = 0
    is_done: bool = False
    # After a restart the output so far is replayed as prompt; probation lasts until
    # the request has produced a token beyond ``probation_output``.
    replay_ids: tuple[int, ...] = ()
    num_restarts: int = 0
    probation_output: int | None = None
    # Whether the failed frame behind a pending restart counts against MAX_RESTARTS.
    restart_charged: bool = True
    # Monotonic clock readings for the phase histograms (queue, prefill, decode).
    arrival_ns: int = 0
    admitted_ns: int = 0
    first_token_ns: int | None = None
    num_cached_tokens: int = 0  # prompt tokens restored from a retained checkpoint
    state_row: int | None = None  # the snapshot row of the state operation being launched
    state_ok: bool = True  # the worker's verdict on that state operation
    pending_finish: str | None = None  # finish reason held until the terminal snapshot
    preempting: bool = False  # preempted: its terminal snapshot is pending (preemption.py)
    # Vision windows (runtime/window_engine.py): the windows of a prompt whose images
    # exceed the prepared feature storage, the active one, and the private snapshot row.
    windows: tuple[VisionWindow, ...] = ()
    window_index: int = 0
    window_row: int | None = None
    base_spec: RequestSpec | None = None
    # Prompt logprobs scored so far, by prompt token index (1 .. n - 1), and whether the
    # client has them (publication.py sends them once, on the first chunk).
    prompt_scores: dict[int, PromptLogprob] = field(default_factory=dict)
    prompt_scores_sent: bool = False
    # Structured outputs: the request's grammar matcher (runtime.grammar.GrammarState),
    # made by the worker at its first frame from the output so far (a restart's replay).
    grammar: object | None = None

    @property
    def vision_window(self) -> tuple[int, ...] | None:
        """The image indices of the active vision window; None: every image (one window)."""
        return self.windows[self.window_index].images if len(self.windows) > 1 else None

    @property
    def prompt_ids(self) -> tuple[int, ...]:
        """What the model consumes as prompt (the request's prompt, plus any replay)."""
        return self.request.prompt_ids + self.replay_ids

    @property
    def on_probation(self) -> bool:
        return self.probation_output is not None and not self.is_done


class Engine(Publication):
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
        self._start_ns = clock_ns()
        self._lock = threading.Lock()
        self._wakeup = threading.Condition(self._lock)
        self._inbox: collections.deque[tuple[GenerationRequest, Sink]] = collections.deque()
        self._cancels: set[str] = set()
        self._waiting: collections.deque[tuple[GenerationRequest, Sink]] = collections.deque()
        self.live: dict[RequestHandle, LiveRequest] = {}
        self._by_id: dict[str, RequestHandle] = {}
        self._inflight: collections.deque[_Inflight] = collections.deque()
        self._retry: collections.deque[LiveRequest] = collections.deque()
        self._arrival_ns: dict[str, int] = {}
        # Slots held by admitted requests (read by submit on other threads, under the lock).
        self._num_occupied = 0
        self._is_stopped = False
        self._next_fence = 0
        # Test-only fault hook (runtime/faults.py): called with ("publish", request) before
        # a request publishes and with ("step", request) for each live request every step.
        self.fault_hook: Callable[[str, LiveRequest], None] | None = None
        self.retention = RetentionHooks(lambda: self.scheduler, checkpoints, self.stats)
        self.preemption = Preemption(self)
        self.vision_windows = vision_windows or VisionWindowHooks()
        # Called after each completed frame with (plan, result): per-step timing for
        # `ignition generate --json` and test reports, without coupling them to the loop.
        self.frame_listeners: list[Callable[[ScheduledPlan, FrameResult], None]] = []

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
            held = self._num_occupied + len(self._retry) + len(self.preemption.resume)
            free = max(0, self.num_slots - held)
            if len(self._inbox) + len(self._waiting) >= self.max_waiting + free:
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
            resume = self.preemption.resume
            if not (
                self._inbox or self._cancels or self.live or self._waiting or self._retry or resume
            ):
                self._wakeup.wait(timeout_s)

    # -- the loop ------------------------------------------------------------------

    @property
    def has_work(self) -> bool:
        return bool(
            self.live
            or self._waiting
            or self._inflight
            or self._inbox
            or self._retry
            or self.preemption.resume
        )

    def step(self) -> bool:
        """One turn; returns whether anything was executed or admitted."""
        progressed = self._drain_inbox()
        self._admit_waiting()
        if self.fault_hook is not None:
            for live in list(self.live.values()):
                self.fault_hook("step", live)
        self.scheduler.advance_to(self._now_ns())
        while len(self._inflight) < 2:
            plan = self.scheduler.plan()
            if plan is None:
                break
            fence = Fence(self._next_fence)
            try:
                self.scheduler.commit(plan, fence)
            except ResourceShortage:
                if not self._inflight:  # nothing in flight will free pages: preempt
                    self.preemption.relieve(plan)
                    progressed = True
                break
            except SchedulerError:
                break  # needs an empty window: drain the queue, then replan
            self._next_fence += 1
            self._await_grammar_feedback(plan)
            try:
                self.retention.before_launch(plan, self.live)
                self.vision_windows.before_launch(plan, self.live)
                pending = self.worker.launch(plan, fence, self.live)
            except Exception as err:  # a failed frame fails its requests, not the server
                if isinstance(err, FatalWorkerError):
                    raise
                self._fail_frame(fence, plan, err)
            else:
                self._inflight.append(_Inflight(fence, plan, pending))
            progressed = True
        if self._inflight:
            self._complete_oldest()
            progressed = True
        self._reap()
        self._record_usage()
        return progressed

    def _await_grammar_feedback(self, plan: ScheduledPlan) -> None:
        """Complete the frames in flight that hold a constrained request of ``plan`` before
        launching it: its grammar mask needs every token before the position it samples on
        the host (runtime/grammar.py; the design's completion-feedback rule for grammars).
        Completion runs in fence order; the committed plan is launched right after."""
        constrained = [
            lane.handle
            for lane in plan.lanes
            if (live := self.live.get(lane.handle)) is not None
            and live.request.sampling.grammar is not None
        ]
        while constrained and any(self._is_inflight(h) for h in constrained):
            self._complete_oldest()

    def _record_usage(self) -> None:
        running = sum(1 for live in self.live.values() if not live.is_done and not live.preempting)
        preempted = len(self.preemption.resume) + self.preemption.num_preempting
        waiting = len(self._waiting) + len(self._retry)
        self.stats.set_queue(running=running, waiting=waiting, preempted=preempted)
        usage = self.scheduler.usage()
        if usage.num_pages > 0:  # a scheduler with a page ledger (Helios)
            used = max(0, usage.num_pages - usage.num_free_pages)
            self.stats.set_usage(self._num_occupied, self.num_slots, used, usage.num_pages)

    def run_until_idle(self, max_steps: int = 1_000_000) -> None:
        """Drive the loop until every request has finished (tests, ``generate``)."""
        for _ in range(max_steps):
            if not self.has_work:
                return
            self.step()
        raise RuntimeError(f"the engine did not go idle within {max_steps} steps")

    # -- internals -----------------------------------------------------------------

    def _now_ns(self) -> int:
        return self._clock_ns() - self._start_ns

    def _drain_inbox(self) -> bool:
        with self._lock:
            arrivals = list(self._inbox)
            self._inbox.clear()
            cancels = set(self._cancels)
            self._cancels.clear()
        self._waiting.extend(arrivals)
        for request_id in cancels:
            self._cancel(request_id)
        return bool(arrivals or cancels)

    def _admit_waiting(self) -> None:
        if not self._admit_retry() or not self.preemption.admit_resumed():
            return
        while self._waiting:
            request, sink = self._waiting[0]
            if not self.retention.can_admit():
                return  # no free slot yet; stays first in line
            admission = self.retention.admit(request, self._now_ns())
            admitted_ns = self._clock_ns()
            try:
                spec = RequestSpec(
                    num_prompt_tokens=len(request.prompt_ids),
                    max_output_tokens=request.sampling.max_tokens,
                    context_capacity=self.max_context_tokens,
                    message_endpoints=request.message_end_offsets,
                    image_spans=image_spans(request),
                    restore_tokens=admission.restore_tokens,
                    capture_ends=admission.capture_ends,
                    terminal_snapshot=admission.terminal_snapshot,
                    max_drafts=draft_limit(request.sampling),
                    admitted_ns=admitted_ns,
                    host_stops=request.sampling.has_host_stops,
                )
                windowed = self.vision_windows.admit(request, spec, self.scheduler)
            except SchedulerError as err:  # a request Helios can never serve
                self.retention.release(request)
                self._waiting.popleft()
                self.stats.record_finished("error")
                _deliver(sink, StreamChunk("", (), len(request.prompt_ids), 0, "error", str(err)))
                continue
            if windowed is None:
                self.retention.release(request)
                return  # no free private snapshot row yet; stays first in line
            try:
                handle = self.scheduler.admit(windowed.spec)
            except SchedulerError:
                self.retention.release(request)
                self.vision_windows.release(request)
                return  # no free slot yet; stays first in line
            self._waiting.popleft()
            detokenizer = IncrementalDetokenizer(
                self.decoder,
                request.sampling.stop,
                request.prompt_ids,
                skip_special_tokens=request.sampling.skip_special_tokens,
            )
            self.retention.admitted(admission)
            live = LiveRequest(request, handle, sink, detokenizer)
            live.num_cached_tokens = admission.restore_tokens
            live.windows, live.window_row, live.base_spec = windowed.windows, windowed.row, spec
            with self._lock:
                live.arrival_ns = self._arrival_ns.pop(request.request_id, self._clock_ns())
            live.admitted_ns = admitted_ns
            self._add_live(live)

    def _admit_retry(self) -> bool:
        """Readmit the oldest restarted request unless another one is on probation.

        Returns False when it is blocked on a slot (new arrivals then wait behind it).
        """
        if not self._retry or any(live.on_probation for live in self.live.values()):
            return True
        old = self._retry[0]
        replay = tuple(old.output_ids)
        if old.request.sampling.max_tokens - len(replay) < 1:  # nothing left to generate
            self._retry.popleft()
            self._finish(old, "length", notify_scheduler=False)
            return True
        spec = RequestSpec(
            num_prompt_tokens=len(old.request.prompt_ids) + len(replay),
            max_output_tokens=old.request.sampling.max_tokens - len(replay),
            context_capacity=self.max_context_tokens,
            image_spans=image_spans(old.request),
            max_drafts=draft_limit(old.request.sampling),
            admitted_ns=old.admitted_ns,
            host_stops=old.request.sampling.has_host_stops,
        )
        windowed = self.vision_windows.admit(old.request, spec, self.scheduler)
        if windowed is None:
            return False
        try:
            handle = self.scheduler.admit(windowed.spec)
        except SchedulerError:
            self.vision_windows.release(old.request)
            return False
        self._retry.popleft()
        log.warning("%s: restarting after a failed frame", old.request.request_id)
        live = self._continuation(old, handle, replay)
        live.num_restarts = old.num_restarts + int(old.restart_charged)
        live.probation_output = len(replay)
        live.num_cached_tokens = 0  # the restart runs without retention: nothing restored
        live.windows, live.window_row, live.base_spec = windowed.windows, windowed.row, spec
        self._add_live(live)
        return True

    def _continuation(
        self, old: LiveRequest, handle: RequestHandle, replay: tuple[int, ...]
    ) -> LiveRequest:
        """``old`` continued under a new handle, its output so far replayed as prompt."""
        live = LiveRequest(
            old.request,
            handle,
            old.sink,
            old.detokenizer,
            output_ids=list(replay),
            replay_ids=replay,
            num_restarts=old.num_restarts,
            arrival_ns=old.arrival_ns,
            admitted_ns=old.admitted_ns,
            first_token_ns=old.first_token_ns,
        )
        live.num_cached_tokens = old.num_cached_tokens  # usage reports prompt tokens only
        # The client has (or will get) the prompt logprobs once; a replay rescores the same
        # positions, which changes nothing.
        live.prompt_scores, live.prompt_scores_sent = old.prompt_scores, old.prompt_scores_sent
        return live

    def _add_live(self, live: LiveRequest) -> None:
        self.live[live.handle] = live
        self._by_id[live.request.request_id] = live.handle
        with self._lock:
            self._num_occupied += 1

    def _cancel(self, request_id: str) -> None:
        for i, (request, sink) in enumerate(self._waiting):
            if request.request_id == request_id:
                del self._waiting[i]
                self._finish_unadmitted(request, sink)
                return
        for i, old in enumerate(self._retry):
            if old.request.request_id == request_id:
                del self._retry[i]
                self.stats.record_finished("abort")
                n = len(old.request.prompt_ids)
                _deliver(old.sink, StreamChunk("", (), n, len(old.output_ids), "abort"))
                return
        if self.preemption.cancel(request_id):
            return
        handle = self._by_id.get(request_id)
        live = self.live.get(handle) if handle is not None else None
        if live is not None and not live.is_done:
            self._finish(live, "abort", notify_scheduler=True)

    def _finish_unadmitted(self, request: GenerationRequest, sink: Sink) -> None:
        with self._lock:
            self._arrival_ns.pop(request.request_id, None)
        self.stats.record_finished("abort")
        _deliver(sink, StreamChunk("", (), len(request.prompt_ids), 0, "abort"))

    def _complete_oldest(self) -> None:
        frame = self._inflight.popleft()
        try:
            result = self.worker.wait(frame.pending)
        except Exception as err:
            if isinstance(err, FatalWorkerError):
                raise
            self._fail_frame(frame.fence, frame.plan, err)
            return
        self.scheduler.advance_to(self._now_ns())
        kind = frame.plan.descriptor.kind.value
        self._fail_rows(result.failed)
        try:
            tokens = self._complete_in_scheduler(frame, result)
        except SchedulerError as err:  # malformed records: Helios changed nothing
            self._fail_frame(frame.fence, frame.plan, err)
            return
        self.stats.record_execution(kind, result.timing.device_ns, frame.plan.execution_class.value)
        self.retention.after_frame(frame.plan, self.live, result.timing.device_ns, ok=True)
        for live in self.vision_windows.held_after(frame.plan, self.live, self.scheduler):
            self._next_window(live)
        for i, offered in enumerate(result.num_offered_drafts):
            if offered > 0:
                accepted = max(0, len(result.records[i].token_ids) - 1)
                self.stats.record_speculation(offered, accepted)
        for record in result.records:
            live = self.live.get(record.handle)
            if live is not None and record.num_prompt_tokens:
                live.num_prompt_consumed += record.num_prompt_tokens
                self.stats.record_tokens(record.num_prompt_tokens, 0)
        self._keep_prompt_scores(result.prompt_logprobs)
        self._publish(frame.fence, tokens, result.records, result.logprobs)
        for handle in self.retention.retired(frame.plan, self.live):
            live = self.live[handle]
            if live.preempting:
                self.preemption.retired(live)
            elif not live.is_done and live.pending_finish is not None:
                self._finish(live, live.pending_finish, notify_scheduler=False)
        for listener in self.frame_listeners:
            listener(frame.plan, result)

    def _fail_rows(self, failed: dict[RequestHandle, str]) -> None:
        """End the requests whose rows the worker reported failed (a non-finite sampling
        distribution), before the frame completes: cancelled first, Helios accepts their
        token-less records, and the frame's other requests go on untouched."""
        for handle, message in failed.items():
            live = self.live.get(handle)
            if live is not None and not live.is_done:
                log.warning("request %s: %s", live.request.request_id, message)
                self._finish(live, "error", notify_scheduler=True, error=message)

    def _next_window(self, live: LiveRequest) -> None:
        """Rebind a request held at its window boundary to a fresh generation, which
        restores the boundary from the private row (runtime/window_engine.py)."""
        old = live.handle
        self.scheduler.cancel(old)  # idle: its slot and pages are released now
        self.worker.release(old)
        handle = self.scheduler.admit(self.vision_windows.next_spec(live))
        self.worker.carry_history(old, handle)  # penalties see every window's tokens
        del self.live[old]
        live.handle = handle
        self.live[handle] = live
        self._by_id[live.request.request_id] = handle

    def _complete_in_scheduler(self, frame: _Inflight, result: FrameResult) -> list[GeneratedToken]:
        report = CompletionReport(result.records, result.timing, result.sidecar, result.survival)
        return self.scheduler.complete(frame.fence, report)

    def _fail_frame(self, fence: Fence, plan: ScheduledPlan, err: Exception) -> None:
        """Settle the requests of a frame that could not execute, then retire the frame.

        A request that ran alone, was already on probation or has used its restarts ends
        with the error; the others restart (see the module docstring). Either way they are
        cancelled first, so Helios accepts records without tokens for them; zero device
        time records no cost observation.
        """
        message = f"{plan.descriptor.name} failed: {type(err).__name__}: {err}"
        log.error("fence %d: %s", fence.value, message, exc_info=err)
        self.retention.after_frame(plan, self.live, 0, ok=False)
        involved = [
            live
            for lane in plan.lanes
            if (live := self.live.get(lane.handle)) is not None and not live.is_done
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
                self._finish(live, "error", notify_scheduler=True, error=message)
            else:
                live.is_done = True
                self._cancel_in_scheduler(live.handle)
                # The restart runs without retention: its copies are suppressed and its
                # rows freed when the old handle is reaped.
                self.retention.cancel(live.request)
                self._retry.append(live)
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
        for handle in [h for h, live in self.live.items() if live.is_done]:
            if not self._is_inflight(handle):
                self.worker.release(handle)
                live = self.live.pop(handle)
                self.retention.release(live.request)
                if self._by_id.get(live.request.request_id) == handle:
                    del self._by_id[live.request.request_id]
                    self.vision_windows.release(live.request)  # not while a restart runs
                with self._lock:
                    self._num_occupied -= 1

    def _is_inflight(self, handle: RequestHandle) -> bool:
        return any(f.plan.lane_of(handle) is not None for f in self._inflight)

    def _finish(
        self,
        live: LiveRequest,
        reason: str,
        notify_scheduler: bool,
        error: str | None = None,
        stop_reason: int | str | None = None,
    ) -> None:
        live.is_done = True
        if notify_scheduler:
            self._cancel_in_scheduler(live.handle)
            self.retention.cancel(live.request)
        else:
            self.retention.drop_terminal(live)
        self.stats.record_finished(reason)
        self._record_phases(live)
        chunk = StreamChunk(
            "",
            (),
            len(live.request.prompt_ids),
            len(live.output_ids),
            reason,
            error,
            stop_reason=stop_reason,
            num_cached_tokens=live.num_cached_tokens,
        )
        _deliver(live.sink, chunk)

    def _record_phases(self, live: LiveRequest) -> None:
        now = self._clock_ns()
        first = live.first_token_ns
        self.stats.record_phases(
            (live.admitted_ns - live.arrival_ns) / 1e9,
            ((first if first is not None else now) - live.admitted_ns) / 1e9,
            (now - first) / 1e9 if first is not None else None,
        )

    def _cancel_in_scheduler(self, handle: RequestHandle) -> None:
        """Stop selection; a request Helios already finished needs nothing more."""
        try:
            self.scheduler.cancel(handle)
        except SchedulerError as err:
            log.debug("cancel %s: %s", handle, err)

    # -- when the loop cannot continue ---------------------------------------------

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
        for request, sink in [*self._waiting, *arrivals]:
            self.stats.record_finished("error")
            n = len(request.prompt_ids)
            _deliver(sink, StreamChunk("", (), n, 0, "error", message))
        self._waiting.clear()
        open_requests = [
            *self._retry,
            *self.preemption.resume,
            *(live for live in self.live.values() if not live.is_done),
        ]
        self._retry.clear()
        self.preemption.resume.clear()
        for live in open_requests:
            live.is_done = True
            self.stats.record_finished("error")
            n = len(live.request.prompt_ids)
            _deliver(live.sink, StreamChunk("", (), n, len(live.output_ids), "error", message))


def image_spans(request: GenerationRequest) -> tuple[tuple[int, int], ...]:
    """The request's atomic image spans, which no prefill chunk may split."""
    return () if request.images is None else request.images.span_bounds


def check_token_ids(ids: Sequence[int], vocab_size: int) -> None:
    """Every id must index the embedding table; raise RequestError naming the first bad one."""
    for i, token in enumerate(ids):
        if not 0 <= token < vocab_size:
            raise RequestError(
                f"prompt[{i}] = {token} is not a token id of this model: its vocabulary has "
                f"{vocab_size} ids (0..{vocab_size - 1})"
            )
