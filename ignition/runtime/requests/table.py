"""Every request the engine holds, and the one state machine it moves through."""

from __future__ import annotations

import collections
import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ignition.helios import DraftSource, RequestHandle, RequestSpec, VisionWindow
from ignition.runtime.requests.request import GenerationRequest, PromptLogprob, StreamChunk

if TYPE_CHECKING:
    from ignition.runtime.requests.detokenize import IncrementalDetokenizer

Sink = Callable[[StreamChunk], None]


class RequestState(enum.Enum):
    WAITING = "waiting"
    LIVE = "live"
    RESTARTING = "restarting"
    PREEMPTED = "preempted"
    RESUMING = "resuming"
    FINISHED = "finished"
    REAPED = "reaped"


# The states whose handle still takes work (every other one is ``is_done``); module
# constants because ``is_done`` is read for every request many times a step.
_LIVE, _PREEMPTED = RequestState.LIVE, RequestState.PREEMPTED


class RequestStateError(RuntimeError):
    """A transition the request state machine does not have (a loop bug)."""


@dataclass
class LiveRequest:
    """Everything the engine and the worker know about one admitted request."""

    request: GenerationRequest
    handle: RequestHandle
    sink: Sink
    detokenizer: IncrementalDetokenizer
    output_ids: list[int] = field(default_factory=list)
    num_prompt_consumed: int = 0
    # Written only by RequestTable's transitions.
    state: RequestState = RequestState.LIVE
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
    # Vision windows (runtime/loop/window_hooks.py): the windows of a prompt whose images
    # exceed the prepared feature storage, the active one, and the private snapshot row.
    windows: tuple[VisionWindow, ...] = ()
    window_index: int = 0
    window_row: int | None = None
    base_spec: RequestSpec | None = None
    # Prompt logprobs scored so far, by prompt token index (1 .. n - 1), and whether the
    # client has them (loop/publication.py sends them once, on the first chunk).
    prompt_scores: dict[int, PromptLogprob] = field(default_factory=dict)
    prompt_scores_sent: bool = False
    # Structured outputs: the request's grammar matcher (runtime.grammar.GrammarState),
    # made by the worker at its first frame from the output so far (a restart's replay).
    grammar: object | None = None
    # Proposal sources' memos of their last search for it, by source (proposals/source.py
    # DraftRow), so the offer Helios reads and the frame's drafts are one search.
    proposal_memo: dict[DraftSource, object] = field(default_factory=dict)
    # Helios's remaining output (its RequestView's), read when the request left its handle
    # (restart or preempt), before Helios released it: the readmission's output limit.
    remaining_output: int | None = None

    @property
    def is_done(self) -> bool:
        """Whether this handle takes no more work (finished, or readmitted elsewhere)."""
        state = self.state
        return state is not _LIVE and state is not _PREEMPTED

    @property
    def preempting(self) -> bool:
        """Preempted: its terminal snapshot is pending (runtime/loop/preemption.py)."""
        return self.state is _PREEMPTED

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


class RequestTable:
    """Waiting arrivals, live handles, and the restart and resume lines (docs/runtime.md)."""

    def __init__(self) -> None:
        self.waiting: collections.deque[tuple[GenerationRequest, Sink]] = collections.deque()
        # Every admitted handle until it is reaped, done or not (it holds its slot).
        self.live: dict[RequestHandle, LiveRequest] = {}
        self.restarting: collections.deque[LiveRequest] = collections.deque()
        self.resuming: collections.deque[LiveRequest] = collections.deque()
        self._by_id: dict[str, RequestHandle] = {}

    @property
    def num_occupied(self) -> int:
        """Slots held by admitted handles (finished ones until they are reaped)."""
        return len(self.live)

    @property
    def num_held(self) -> int:
        """Slots taken or promised: occupied, plus the requests waiting to be readmitted."""
        return len(self.live) + len(self.restarting) + len(self.resuming)

    @property
    def has_open(self) -> bool:
        return bool(self.live or self.waiting or self.restarting or self.resuming)

    def by_id(self, request_id: str) -> LiveRequest | None:
        handle = self._by_id.get(request_id)
        return self.live.get(handle) if handle is not None else None

    def open_live(self) -> Iterator[LiveRequest]:
        """Live handles still taking work."""
        return (live for live in self.live.values() if not live.is_done)

    def state_of(self, request_id: str) -> RequestState | None:
        """The request's state; None for a request the table does not hold."""
        if any(r.request_id == request_id for r, _ in self.waiting):
            return RequestState.WAITING
        for old in (*self.restarting, *self.resuming):
            if old.request.request_id == request_id:
                return old.state
        live = self.by_id(request_id)
        return live.state if live is not None else None

    def arrive(self, request: GenerationRequest, sink: Sink) -> None:
        """A request the loop picked up from its inbox waits for a slot."""
        self.waiting.append((request, sink))

    def admit(self, live: LiveRequest) -> None:
        """``live`` takes its slot: the first waiting arrival, restart or resume."""
        request_id = live.request.request_id
        if live.handle in self.live:
            raise RequestStateError(f"admit {request_id}: {live.handle} is still held")
        if self.restarting and self.restarting[0].request.request_id == request_id:
            self.restarting.popleft()
        elif self.resuming and self.resuming[0].request.request_id == request_id:
            self.resuming.popleft()
        elif self.waiting and self.waiting[0][0].request_id == request_id:
            self.waiting.popleft()
        else:
            raise RequestStateError(f"admit {request_id}: not first in any line")
        live.state = RequestState.LIVE
        self.live[live.handle] = live
        self._by_id[request_id] = live.handle

    def restart(self, live: LiveRequest, remaining_output: int) -> None:
        """A shared frame failed: the request waits to be readmitted with its output and
        ``remaining_output`` (Helios's, read from its view now) as its output limit."""
        self._move(live, "restart", (RequestState.LIVE,), RequestState.RESTARTING)
        live.remaining_output = remaining_output
        self.restarting.append(live)

    def preempt(self, live: LiveRequest, remaining_output: int) -> None:
        """The request gives way; its terminal snapshot (if any) is pending. It resumes
        with ``remaining_output`` (Helios's, read from its view now) as its output limit."""
        self._move(live, "preempt", (RequestState.LIVE,), RequestState.PREEMPTED)
        live.remaining_output = remaining_output

    def resume(self, live: LiveRequest) -> None:
        """A preempted request's snapshot completed or was given up: it waits to resume."""
        self._move(live, "resume", (RequestState.PREEMPTED,), RequestState.RESUMING)
        self.resuming.append(live)

    def finish(self, live: LiveRequest) -> None:
        """The request ends (its final chunk is the caller's to send)."""
        allowed = (
            RequestState.LIVE,
            RequestState.PREEMPTED,
            RequestState.RESTARTING,
            RequestState.RESUMING,
        )
        was = live.state
        self._move(live, "finish", allowed, RequestState.FINISHED)
        if was is RequestState.RESTARTING:
            self.restarting.remove(live)
        elif was is RequestState.RESUMING:
            self.resuming.remove(live)

    def drop_waiting(self, request_id: str) -> tuple[GenerationRequest, Sink] | None:
        """A waiting arrival ends before admission (cancelled, or never servable)."""
        for i, (request, sink) in enumerate(self.waiting):
            if request.request_id == request_id:
                del self.waiting[i]
                return request, sink
        return None

    def reap(self, live: LiveRequest) -> bool:
        """Free a done handle's slot; True when it was the request's current handle."""
        if not live.is_done or self.live.get(live.handle) is not live:
            raise RequestStateError(
                f"reap {live.request.request_id}: {live.handle} is {live.state.value}"
            )
        del self.live[live.handle]
        current = self._by_id.get(live.request.request_id) == live.handle
        if current:
            del self._by_id[live.request.request_id]
        if live.state is RequestState.FINISHED:
            live.state = RequestState.REAPED
        return current

    def rebind(self, live: LiveRequest, handle: RequestHandle) -> None:
        """A live request continues under a fresh generation (its next vision window)."""
        if live.is_done or self.live.get(live.handle) is not live:
            raise RequestStateError(
                f"rebind {live.request.request_id}: {live.handle} is {live.state.value}"
            )
        del self.live[live.handle]
        live.handle = handle
        self.live[handle] = live
        self._by_id[live.request.request_id] = handle

    def close(self) -> tuple[list[tuple[GenerationRequest, Sink]], list[LiveRequest]]:
        """The loop stops: every open request finishes; returns them for their final chunks."""
        waiting = list(self.waiting)
        self.waiting.clear()
        open_requests = [*self.restarting, *self.resuming, *self.open_live()]
        self.restarting.clear()
        self.resuming.clear()
        for live in open_requests:
            live.state = RequestState.FINISHED
        return waiting, open_requests

    def _move(
        self,
        live: LiveRequest,
        name: str,
        allowed: tuple[RequestState, ...],
        to: RequestState,
    ) -> None:
        if live.state not in allowed:
            raise RequestStateError(
                f"{name} {live.request.request_id}: it is {live.state.value}; "
                f"{name} needs {' or '.join(s.value for s in allowed)}"
            )
        live.state = to
