"""Prompt logprobs, scored after the program in the same launch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ignition.compiler.programs import Program
from ignition.helios import RequestHandle, ScheduledPlan
from ignition.model.prompt_logprobs import PromptScores
from ignition.runtime.executors.base import WorkerError
from ignition.runtime.executors.context import ExecutorContext
from ignition.runtime.requests.request import PromptLogprob

if TYPE_CHECKING:
    from ignition.runtime.requests.table import LiveRequest


@dataclass(frozen=True)
class PromptJob:
    """The prompt positions a frame scores for one prompt lane."""

    handle: RequestHandle
    start: int
    targets: tuple[int, ...]
    num_top: int
    hidden_start: int = 0


def prompt_job(
    context: ExecutorContext, plan: ScheduledPlan, live: dict[RequestHandle, LiveRequest]
) -> tuple[PromptJob, ...]:
    """What this frame's prompt lanes score for requests that asked for prompt logprobs."""
    d = plan.descriptor
    lane_capacity = d.lane_capacity
    jobs = []
    for k, row in enumerate(plan.prompt_rows):
        lane = plan.lanes[row]
        request = live[lane.handle]
        num_top = request.request.sampling.prompt_logprobs
        if num_top is None:
            continue
        if context.score_prompt is None:
            raise WorkerError(f"{lane.handle}: prompt logprobs, and no scoring stage")
        start = context.ledger.prompt_cursor.get(lane.handle, 0)
        end = min(start + lane.num_prompt_tokens, len(request.request.prompt_ids) - 1)
        if end > start:
            targets = request.prompt_ids[start + 1 : end + 1]
            jobs.append(PromptJob(lane.handle, start, targets, num_top, k * lane_capacity))
    return tuple(jobs)


def score(context: ExecutorContext, program: Program, job: PromptJob) -> PromptScores:
    """The prompt-logprobs stage over the hidden states the program just kept."""
    hidden = program.prompt_hidden
    if hidden is None or context.score_prompt is None:
        raise WorkerError(f"{program.descriptor.name}: no prompt hidden states to score")
    targets = torch.tensor(job.targets, dtype=torch.int64)
    if hidden.is_cuda:  # a pageable copy would block the host until the frame ends
        targets = targets.pin_memory().to(hidden.device, non_blocking=True)
    rows = hidden[job.hidden_start : job.hidden_start + len(job.targets)]
    return context.score_prompt(rows, targets, job.num_top)


def prompt_logprobs(
    jobs: tuple[PromptJob, ...], scores: tuple[PromptScores, ...]
) -> dict[RequestHandle, tuple[int, tuple]]:
    """The frame's scored prompt positions, read from the device only when some were."""
    result: dict[RequestHandle, tuple[int, tuple]] = {}
    for job, lane_scores in zip(jobs, scores, strict=True):
        result |= _lane_logprobs(job, lane_scores)
    return result


def _lane_logprobs(job: PromptJob, scores: PromptScores) -> dict[RequestHandle, tuple[int, tuple]]:
    chosen, ranks = scores.logprob.tolist(), scores.rank.tolist()
    ids, values = scores.top_ids.tolist(), scores.top_logprobs.tolist()
    k = job.num_top
    entries = tuple(
        PromptLogprob(
            int(token), float(chosen[i]), int(ranks[i]),
            tuple(zip(ids[i][:k], values[i][:k], strict=True)),
        )
        for i, token in enumerate(job.targets)
    )  # fmt: skip
    return {job.handle: (job.start, entries)}
