"""What crosses the seam between the engine loop and a worker: one executed frame."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ignition.helios import (
    CompletionRecord,
    ConfidenceSidecar,
    ExecutionTiming,
    Fence,
    RequestHandle,
    ScheduledPlan,
)
from ignition.runtime.requests.request import PromptLogprob, TokenLogprob
from ignition.runtime.requests.table import LiveRequest


class FatalWorkerError(RuntimeError):
    """A worker failure after which no frame can run: the loop stops."""


@dataclass(frozen=True)
class FrameResult:
    """What the worker reports for one executed frame."""

    records: tuple[CompletionRecord, ...]
    timing: ExecutionTiming
    sidecar: ConfidenceSidecar | None = None
    survival: tuple[tuple[float, ...], ...] | None = None
    num_offered_drafts: tuple[int, ...] = ()
    # Raw logprobs per emitted token, for the requests that asked for them.
    logprobs: dict[RequestHandle, tuple[TokenLogprob, ...]] = field(default_factory=dict)
    # Scored prompt positions of the prompt lane that asked for prompt logprobs:
    # {handle: (first position p, entries for the prompt tokens p + 1, p + 2, ...)}.
    prompt_logprobs: dict[RequestHandle, tuple[int, tuple[PromptLogprob, ...]]] = field(
        default_factory=dict
    )
    # Frame-owned readiness timestamps of the PLE rows delivered through the mailbox
    # (runtime/ple/mailbox.Readiness); their exposed delay is timing.readiness_stall_ns.
    readiness: tuple = ()
    # Requests whose sampling distribution was not finite in this frame (their record
    # carries no tokens): the engine ends each with the message; the frame completes.
    failed: dict[RequestHandle, str] = field(default_factory=dict)


class Worker(Protocol):
    """Executes plans: ``launch`` may return early, ``wait`` blocks until outputs are readable."""

    def launch(self, plan: ScheduledPlan, fence: Fence, live: dict[RequestHandle, LiveRequest]): ...

    def wait(self, pending) -> FrameResult: ...

    def release(self, handle: RequestHandle) -> None: ...

    def carry_history(self, old: RequestHandle, new: RequestHandle) -> None: ...
