"""Admission: the three lines of the request table take free slots, oldest line first."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from ignition.helios import RequestSpec, SchedulerError
from ignition.runtime.loop.lifecycle import Lifecycle
from ignition.runtime.loop.publication import check_prompt_scoring
from ignition.runtime.loop.window_hooks import VisionWindowHooks
from ignition.runtime.proposals.registry import sources_for
from ignition.runtime.requests.detokenize import IncrementalDetokenizer, TextDecoder
from ignition.runtime.requests.errors import RequestError
from ignition.runtime.requests.request import GenerationRequest
from ignition.runtime.requests.table import LiveRequest, RequestStateError
from ignition.runtime.retention.checkpoints import Admission

log = logging.getLogger("ignition.engine")
_NO_RETENTION = Admission(0, (), False)


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


def check_request(
    request: GenerationRequest, max_context_tokens: int, vocab_size: int | None, worker: object
) -> None:
    """Refuse at submit (a 400, not a failed frame) what the engine cannot serve."""
    if len(request.prompt_ids) + 1 > max_context_tokens:
        raise RequestError(
            f"the prompt has {len(request.prompt_ids)} tokens; the context is {max_context_tokens}"
        )
    if vocab_size is not None:
        check_token_ids(request.prompt_ids, vocab_size)
    if request.sampling.prompt_logprobs is not None:
        check_prompt_scoring(request, worker)


def request_spec(
    request: GenerationRequest,
    replay: Sequence[int],
    max_output_tokens: int,
    context_capacity: int,
    admitted_ns: int,
    retention: Admission | None,
) -> RequestSpec:
    """The Helios spec of ``request`` with ``replay`` (its output so far) as more prompt."""
    kept = retention or _NO_RETENTION
    sampling = request.sampling
    sources = sources_for(sampling.speculative_method, sampling.grammar is not None)
    return RequestSpec(
        num_prompt_tokens=len(request.prompt_ids) + len(replay),
        max_output_tokens=max_output_tokens,
        context_capacity=context_capacity,
        message_endpoints=request.message_end_offsets if retention is not None else (),
        image_spans=image_spans(request),
        restore_tokens=kept.restore_tokens,
        capture_ends=kept.capture_ends,
        terminal_snapshot=kept.terminal_snapshot,
        max_drafts=sources[0].draft_limit(),
        admitted_ns=admitted_ns,
        host_stops=request.sampling.has_host_stops,
        grammar=request.sampling.grammar is not None,
        proposal_source=sources[0].source,
        host_drafts=any(s.host_drafts for s in sources),
        proposal_choices=tuple(s.source for s in sources) if len(sources) > 1 else (),
    )


def carried_output(old: LiveRequest) -> int:
    """The output limit a readmission gets: Helios's remaining output, which the restart or
    preemption read from the old handle's view before Helios released it."""
    if old.remaining_output is None:
        raise RequestStateError(f"readmit {old.request.request_id}: no remaining output carried")
    return old.remaining_output


class Admissions:
    def __init__(
        self,
        lifecycle: Lifecycle,
        vision_windows: VisionWindowHooks,
        decoder: TextDecoder,
        max_context_tokens: int,
        take_arrival_ns: Callable[[str], int],
    ) -> None:
        self.lifecycle = lifecycle
        self.table = lifecycle.table
        self.vision_windows = vision_windows
        self.decoder = decoder
        self.max_context_tokens = max_context_tokens
        self._take_arrival_ns = take_arrival_ns

    def admit(self) -> None:
        if self._admit_restart() and self._admit_resumed():
            self._admit_waiting()
        # the requests still waiting for a slot: Helios's slot-pressure input
        self.lifecycle.scheduler.note_waiting(len(self.table.waiting))

    def _admit_waiting(self) -> None:
        lc, table = self.lifecycle, self.table
        scheduler, retention = lc.scheduler, lc.retention
        while table.waiting:
            request, sink = table.waiting[0]
            if not retention.can_admit():
                return  # no free slot yet; stays first in line
            admission = retention.admit(request, lc.now_ns())
            admitted_ns = lc.clock_ns()
            try:
                spec = request_spec(
                    request,
                    (),
                    request.sampling.max_tokens,
                    self.max_context_tokens,
                    admitted_ns,
                    admission,
                )
                windowed = self.vision_windows.admit(request, spec, scheduler)
            except SchedulerError as err:  # a request Helios can never serve
                retention.release(request)
                table.drop_waiting(request.request_id)
                lc.end_unadmitted(sink, len(request.prompt_ids), 0, "error", str(err))
                continue
            if windowed is None:
                retention.release(request)
                return  # no free private snapshot row yet; stays first in line
            try:
                handle = scheduler.admit(windowed.spec)
            except SchedulerError:
                retention.release(request)
                self.vision_windows.release(request)
                return  # no free slot yet; stays first in line
            detokenizer = IncrementalDetokenizer(
                self.decoder,
                request.sampling.stop,
                request.prompt_ids,
                skip_special_tokens=request.sampling.skip_special_tokens,
            )
            retention.admitted(admission)
            live = LiveRequest(request, handle, sink, detokenizer)
            live.num_cached_tokens = admission.restore_tokens
            live.windows, live.window_row, live.base_spec = windowed.windows, windowed.row, spec
            live.arrival_ns = self._take_arrival_ns(request.request_id)
            live.admitted_ns = admitted_ns
            table.admit(live)

    def _admit_restart(self) -> bool:
        """Readmit the oldest restarted request unless another one is on probation."""
        table, lc = self.table, self.lifecycle
        if not table.restarting or any(live.on_probation for live in table.live.values()):
            return True
        old = table.restarting[0]
        remaining = carried_output(old)
        if remaining < 1:  # nothing left to generate
            lc.finish(old, "length", notify_scheduler=False)
            return True
        replay = tuple(old.output_ids)
        spec = request_spec(
            old.request,
            replay,
            remaining,
            self.max_context_tokens,
            old.admitted_ns,
            None,
        )
        windowed = self.vision_windows.admit(old.request, spec, lc.scheduler)
        if windowed is None:
            return False
        try:
            handle = lc.scheduler.admit(windowed.spec)
        except SchedulerError:
            self.vision_windows.release(old.request)
            return False
        log.warning("%s: restarting after a failed frame", old.request.request_id)
        live = lc.continuation(old, handle)
        live.num_restarts = old.num_restarts + int(old.restart_charged)
        live.probation_output = len(replay)
        live.num_cached_tokens = 0  # the restart runs without retention: nothing restored
        live.windows, live.window_row, live.base_spec = windowed.windows, windowed.row, spec
        table.admit(live)
        return True

    def _admit_resumed(self) -> bool:
        """Readmit preempted requests, oldest first; False while one still waits."""
        table, lc = self.table, self.lifecycle
        scheduler, retention = lc.scheduler, lc.retention
        while table.resuming:
            old = table.resuming[0]
            if old.handle in table.live:
                return False  # its old handle is not reaped yet
            remaining = carried_output(old)
            if remaining < 1:
                lc.finish(old, "length", notify_scheduler=False)
                continue
            replay = tuple(old.output_ids)
            prompt = old.request.prompt_ids + replay
            if not scheduler.can_resume(len(prompt), remaining):
                return False
            admission = retention.admit(old.request, lc.now_ns(), prompt_ids=prompt)
            spec = request_spec(
                old.request,
                replay,
                remaining,
                self.max_context_tokens,
                old.admitted_ns,
                admission,
            )
            try:
                windowed = self.vision_windows.admit(old.request, spec, scheduler)
                if windowed is None:  # no private window row free yet
                    retention.release(old.request)
                    return False
                handle = scheduler.admit(windowed.spec)
            except SchedulerError:
                retention.release(old.request)
                self.vision_windows.release(old.request)
                return False
            log.info(
                "%s: resumed (%d of %d tokens restored)",
                old.request.request_id,
                admission.restore_tokens,
                len(prompt),
            )
            live = lc.continuation(old, handle)
            live.windows, live.window_row, live.base_spec = windowed.windows, windowed.row, spec
            table.admit(live)
        return True
