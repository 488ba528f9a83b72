"""Prompt logprobs, scored after the program in the same launch.

Stream-ordered before any later frame can overwrite them: every program with a prompt lane
writes the lane's final hidden states to one workspace buffer, and
:func:`ignition.model.prompt_logprobs.score_positions` reduces them to [N, K] values for a
prompt lane whose request asked, and only then.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ignition.compiler.programs import Program
from ignition.helios import LaneRole, RequestHandle, ScheduledPlan
from ignition.model.prompt_logprobs import PromptScores
from ignition.runtime.executors.base import WorkerError
from ignition.runtime.executors.context import ExecutorContext
from ignition.runtime.requests import PromptLogprob

if TYPE_CHECKING:
    from ignition.runtime.engine import LiveRequest


@dataclass(frozen=True)
class PromptJob:
    """The prompt positions a frame scores: its prompt lane's chunk positions ``start`` ..
    ``start + len(targets) - 1``, each read at the prompt token after it."""

    handle: RequestHandle
    start: int
    targets: tuple[int, ...]
    num_top: int


def prompt_job(
    context: ExecutorContext, plan: ScheduledPlan, live: dict[RequestHandle, LiveRequest]
) -> PromptJob | None:
    """What this frame's prompt lane scores, if its request asked for prompt logprobs:
    every chunk position but the prompt's last (that one predicts the first output)."""
    lane = next((x for x in plan.lanes if x.role is LaneRole.PROMPT), None)
    if lane is None:
        return None
    request = live[lane.handle]
    num_top = request.request.sampling.prompt_logprobs
    if num_top is None:
        return None
    if context.score_prompt is None:
        raise WorkerError(f"{lane.handle}: prompt logprobs, and no scoring stage")
    start = context.ledger.prompt_cursor.get(lane.handle, 0)
    end = min(start + lane.num_prompt_tokens, len(request.request.prompt_ids) - 1)
    if end <= start:
        return None
    return PromptJob(lane.handle, start, request.prompt_ids[start + 1 : end + 1], num_top)


def score(context: ExecutorContext, program: Program, job: PromptJob) -> PromptScores:
    """The prompt-logprobs stage over the hidden states the program just kept."""
    hidden = program.prompt_hidden
    if hidden is None or context.score_prompt is None:
        raise WorkerError(f"{program.descriptor.name}: no prompt hidden states to score")
    targets = torch.tensor(job.targets, dtype=torch.int64)
    if hidden.is_cuda:  # a pageable copy would block the host until the frame ends
        targets = targets.pin_memory().to(hidden.device, non_blocking=True)
    return context.score_prompt(hidden[: len(job.targets)], targets, job.num_top)


def prompt_logprobs(
    job: PromptJob | None, scores: PromptScores | None
) -> dict[RequestHandle, tuple[int, tuple]]:
    """The frame's scored prompt positions, read from the device only when some were:
    {handle: (first position, one PromptLogprob per position, for the token after it)}."""
    if job is None or scores is None:
        return {}
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
