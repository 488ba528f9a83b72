"""The engine loop: Helios plans, the worker executes, text is published.

One thread owns the scheduler and the worker. Each turn it drains the inbox
(admissions and cancellations from the HTTP threads), lets Helios plan, commits
and launches as long as the two-slot execution queue accepts queueable work,
then waits for the oldest frame, completes it, and publishes what became
visible. Launching before waiting is what overlaps host planning with device
execution: while a captured decode graph runs, the host already plans and
submits the next one.

Publication is where stop strings and detokenization meet the scheduler: a
frame's tokens become text through each request's incremental detokenizer, and
only text actually shown counts as a delivery (``published_output``). A stop
string found in the text ends the request on the host: Helios is told through
``cancel``, which stops selection at once and keeps pages and slot owned through
the last submitted fence.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ignition.helios import (
    CompletionRecord,
    ExecutionTiming,
    Fence,
    GeneratedToken,
    LaneRole,
    RequestHandle,
    RequestSpec,
    ScheduledPlan,
    SchedulerError,
    SchedulerProtocol,
)
from ignition.helios.types import ConfidenceSidecar
from ignition.runtime.detokenize import IncrementalDetokenizer, TextDecoder
from ignition.runtime.requests import GenerationRequest, QueueFullError, RequestError, StreamChunk
from ignition.runtime.stats import EngineStats

Sink = Callable[[StreamChunk], None]
log = logging.getLogger("ignition.engine")


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

    @property
    def prompt_ids(self) -> tuple[int, ...]:
        return self.request.prompt_ids


@dataclass(frozen=True)
class FrameResult:
    """What the worker reports for one executed frame."""

    records: tuple[CompletionRecord, ...]
    timing: ExecutionTiming
    sidecar: ConfidenceSidecar | None = None
    survival: tuple[tuple[float, ...], ...] | None = None
    num_offered_drafts: tuple[int, ...] = ()


class Worker(Protocol):
    """Executes plans. ``launch`` may return before the device finishes (CUDA);
    ``wait`` blocks until the frame's outputs are readable."""

    def launch(self, plan: ScheduledPlan, fence: Fence, live: dict[RequestHandle, LiveRequest]): ...

    def wait(self, pending) -> FrameResult: ...

    def release(self, handle: RequestHandle) -> None: ...


@dataclass
class _Inflight:
    fence: Fence
    plan: ScheduledPlan
    pending: object


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
    ) -> None:
        self.scheduler = scheduler
        self.worker = worker
        self.decoder = decoder
        self.max_context_tokens = max_context_tokens
        self.eos_token_ids = frozenset(eos_token_ids)
        self.max_waiting = max_waiting
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
        self._next_fence = 0
        # Called after each completed frame with (plan, result): per-step timing for
        # `ignition generate --json` and test reports, without coupling them to the loop.
        self.frame_listeners: list[Callable[[ScheduledPlan, FrameResult], None]] = []

    # -- called from other threads -------------------------------------------------

    def submit(self, request: GenerationRequest, sink: Sink) -> None:
        """Queue a request; raises QueueFullError when the waiting queue is full."""
        if len(request.prompt_ids) + 1 > self.max_context_tokens:
            raise RequestError(
                f"the prompt has {len(request.prompt_ids)} tokens; the context is "
                f"{self.max_context_tokens}"
            )
        with self._wakeup:
            if len(self._inbox) + len(self._waiting) >= self.max_waiting:
                raise QueueFullError(
                    f"{self.max_waiting} requests are already waiting for a slot; retry later"
                )
            self._inbox.append((request, sink))
            self._wakeup.notify()

    def cancel(self, request_id: str) -> None:
        with self._wakeup:
            self._cancels.add(request_id)
            self._wakeup.notify()

    def wait_for_work(self, timeout_s: float) -> None:
        with self._wakeup:
            if not (self._inbox or self._cancels or self.live or self._waiting):
                self._wakeup.wait(timeout_s)

    # -- the loop ------------------------------------------------------------------

    @property
    def has_work(self) -> bool:
        return bool(self.live or self._waiting or self._inflight or self._inbox)

    def step(self) -> bool:
        """One turn; returns whether anything was executed or admitted."""
        progressed = self._drain_inbox()
        self._admit_waiting()
        self.scheduler.advance_to(self._now_ns())
        while len(self._inflight) < 2:
            plan = self.scheduler.plan()
            if plan is None:
                break
            fence = Fence(self._next_fence)
            try:
                self.scheduler.commit(plan, fence)
            except SchedulerError:
                break  # needs an empty window: drain the queue, then replan
            self._next_fence += 1
            try:
                pending = self.worker.launch(plan, fence, self.live)
            except Exception as err:  # a failed frame fails its requests, not the server
                self._fail_frame(fence, plan, err)
            else:
                self._inflight.append(_Inflight(fence, plan, pending))
            progressed = True
        if self._inflight:
            self._complete_oldest()
            progressed = True
        self._reap()
        self.stats.set_queue(running=len(self.live), waiting=len(self._waiting))
        return progressed

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
        while self._waiting:
            request, sink = self._waiting[0]
            try:
                spec = RequestSpec(
                    num_prompt_tokens=len(request.prompt_ids),
                    max_output_tokens=request.sampling.max_tokens,
                    context_capacity=self.max_context_tokens,
                )
            except SchedulerError as err:  # a request Helios can never serve
                self._waiting.popleft()
                self.stats.record_finished("error")
                sink(StreamChunk("", (), len(request.prompt_ids), 0, "error", str(err)))
                continue
            try:
                handle = self.scheduler.admit(spec)
            except SchedulerError:
                return  # no free slot yet; stays first in line
            self._waiting.popleft()
            detokenizer = IncrementalDetokenizer(
                self.decoder, request.sampling.stop, request.prompt_ids
            )
            self.live[handle] = LiveRequest(request, handle, sink, detokenizer)
            self._by_id[request.request_id] = handle

    def _cancel(self, request_id: str) -> None:
        for i, (request, sink) in enumerate(self._waiting):
            if request.request_id == request_id:
                del self._waiting[i]
                self._finish_unadmitted(request, sink)
                return
        handle = self._by_id.get(request_id)
        live = self.live.get(handle) if handle is not None else None
        if live is not None and not live.is_done:
            self._finish(live, "abort", notify_scheduler=True)

    def _finish_unadmitted(self, request: GenerationRequest, sink: Sink) -> None:
        self.stats.record_finished("abort")
        sink(StreamChunk("", (), len(request.prompt_ids), 0, "abort"))

    def _complete_oldest(self) -> None:
        frame = self._inflight.popleft()
        try:
            result = self.worker.wait(frame.pending)
        except Exception as err:
            self._fail_frame(frame.fence, frame.plan, err)
            return
        self.scheduler.advance_to(self._now_ns())
        kind = frame.plan.descriptor.kind.value
        self.stats.record_execution(kind, result.timing.device_ns, frame.plan.execution_class.value)
        if result.sidecar is not None and result.survival is not None:
            tokens = self.scheduler.complete_packed_round_with_survival(
                frame.fence, result.records, result.timing, result.sidecar, result.survival
            )
        elif result.sidecar is not None:
            tokens = self.scheduler.complete_packed_round(
                frame.fence, result.records, result.timing, result.sidecar
            )
        elif result.survival is not None:
            tokens = self.scheduler.complete_with_survival(
                frame.fence, result.records, result.timing, result.survival
            )
        else:
            tokens = self.scheduler.complete(frame.fence, result.records, result.timing)
        for i, offered in enumerate(result.num_offered_drafts):
            if offered > 0:
                accepted = max(0, len(result.records[i].token_ids) - 1)
                self.stats.record_speculation(offered, accepted)
        for record in result.records:
            live = self.live.get(record.handle)
            if live is not None and record.num_prompt_tokens:
                live.num_prompt_consumed += record.num_prompt_tokens
                self.stats.record_tokens(record.num_prompt_tokens, 0)
        self._publish(frame.fence, tokens, result.records)
        for listener in self.frame_listeners:
            listener(frame.plan, result)

    def _fail_frame(self, fence: Fence, plan: ScheduledPlan, err: Exception) -> None:
        """End every request of a frame that could not execute, then retire the frame.

        The requests are cancelled first, so Helios accepts records without tokens for
        them; zero device time records no cost observation.
        """
        message = f"{plan.descriptor.name} failed: {type(err).__name__}: {err}"
        log.error("fence %d: %s", fence.value, message, exc_info=err)
        for lane in plan.lanes:
            live = self.live.get(lane.handle)
            if live is not None and not live.is_done:
                self._finish(live, "error", notify_scheduler=True, error=message)
        records = tuple(
            CompletionRecord(
                lane.handle, lane.num_prompt_tokens if lane.role is LaneRole.PROMPT else 0
            )
            for lane in plan.lanes
        )
        timing = ExecutionTiming(device_ns=0)
        d = plan.descriptor
        if d.is_device_allocated and d.proposal_depth > 0:
            empty = tuple((0.0,) * d.proposal_depth for _ in range(d.batch_capacity))
            self.scheduler.complete_packed_round(
                fence, records, timing, ConfidenceSidecar(planes=(empty, empty))
            )
        else:
            self.scheduler.complete(fence, records, timing)

    def _reap(self) -> None:
        """Free worker state of finished requests once no submitted frame uses them."""
        for handle in [h for h, live in self.live.items() if live.is_done]:
            if not self._is_inflight(handle):
                self.worker.release(handle)
                live = self.live.pop(handle)
                self._by_id.pop(live.request.request_id, None)

    def _is_inflight(self, handle: RequestHandle) -> bool:
        return any(f.plan.lane_of(handle) is not None for f in self._inflight)

    def _publish(
        self, fence: Fence, tokens: list[GeneratedToken], records: Sequence[CompletionRecord]
    ) -> None:
        finished_by_record = {r.handle: r.is_finished for r in records}
        grouped: dict[RequestHandle, list[GeneratedToken]] = collections.defaultdict(list)
        for token in tokens:
            grouped[token.handle].append(token)
        for handle, items in grouped.items():
            live = self.live.get(handle)
            if live is None or live.is_done:
                continue
            ids = [t.token_id for t in items]
            live.output_ids += ids
            self.stats.record_tokens(0, len(ids))
            delta = live.detokenizer.push(ids)
            is_last = items[-1].is_last
            if delta.stopped:
                self._emit(live, fence, delta.text, ids)
                self._finish(live, "stop", notify_scheduler=not is_last)
            elif is_last:
                text = delta.text + live.detokenizer.flush().text
                reason = "stop" if finished_by_record.get(handle) else "length"
                self._emit(live, fence, text, ids)
                self._finish(live, reason, notify_scheduler=False)
            else:
                self._emit(live, fence, delta.text, ids)

    def _emit(self, live: LiveRequest, fence: Fence, text: str, ids: list[int]) -> None:
        """Hand a burst to the client; only visible text counts as a delivery.

        Ids travel even when stop buffering or an incomplete character holds their text
        back, so usage counts and token streams stay exact.
        """
        if not text and not ids:
            return
        live.sink(StreamChunk(text, tuple(ids), len(live.prompt_ids), len(live.output_ids), None))
        if text:
            self.scheduler.published_output(live.handle, fence)

    def _finish(
        self, live: LiveRequest, reason: str, notify_scheduler: bool, error: str | None = None
    ) -> None:
        live.is_done = True
        if notify_scheduler:
            self.scheduler.cancel(live.handle)
        self.stats.record_finished(reason)
        live.sink(StreamChunk("", (), len(live.prompt_ids), len(live.output_ids), reason, error))
