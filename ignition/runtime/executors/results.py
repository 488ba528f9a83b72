"""Result decoding: a program frame's outputs turned into Helios completion records."""

from __future__ import annotations

from ignition.helios import (
    CompletionRecord,
    ConfidenceSidecar,
    ExecutionTiming,
    LaneRole,
    LaneWork,
    RequestHandle,
)
from ignition.model.sampling import INVALID_TOKEN
from ignition.runtime.executors.frames import FrameResult
from ignition.runtime.executors.launched import LaunchedFrame
from ignition.runtime.executors.prompt_scoring import prompt_logprobs
from ignition.runtime.grammar import GRAMMAR_REJECTED
from ignition.runtime.requests.request import TokenLogprob

# What a request whose row emitted INVALID_TOKEN is told (model.sampling).
NON_FINITE_MESSAGE = (
    "sampling failed: this request's token distribution was not finite (NaN or inf logits "
    "after its penalties, bias and temperature); other requests were not affected"
)


def step_result(
    launched: LaunchedFrame, timing: ExecutionTiming, overrun: set[RequestHandle]
) -> FrameResult:
    """A step program's one token per row."""
    out = launched.inflight.outputs
    next_tokens = out.next_tokens.tolist()  # type: ignore[attr-defined]
    failed = failed_rows(launched, [[t] for t in next_tokens])
    failed |= advance_grammars(launched, [[t] for t in next_tokens], failed)
    records = []
    for row, lane in enumerate(launched.lanes):
        ids = [] if lane.handle in failed else [next_tokens[row]]
        eos = launched.eos[row]
        if lane.role is LaneRole.PROMPT:
            ids = ids if lane.max_advance_tokens else []
            records.append(completion_record(lane, ids, eos, overrun, lane.num_prompt_tokens))
        else:
            records.append(completion_record(lane, ids, eos, overrun))
    logprobs = token_logprobs(
        launched, [[t] for t in next_tokens], out.logprob[:, None], out.top_ids[:, None],
        out.top_logprobs[:, None],
    )  # fmt: skip
    return FrameResult(
        tuple(records),
        timing,
        logprobs=logprobs,
        prompt_logprobs=prompt_logprobs(launched.prompt_job, launched.prompt_scores),
        failed=failed,
    )


def round_result(
    launched: LaunchedFrame, timing: ExecutionTiming, overrun: set[RequestHandle]
) -> FrameResult:
    """A round program's verified tokens per row, with its drafts' confidence and survival."""
    out = launched.inflight.outputs
    d = launched.plan.descriptor
    tokens = out.output_tokens.tolist()  # type: ignore[attr-defined]
    verified = out.query_lens.tolist()  # type: ignore[attr-defined]
    failed = failed_rows(launched, tokens)
    failed |= advance_grammars(launched, tokens, failed)
    records, offered = [], []
    for row, lane in enumerate(launched.lanes):
        emitted = [t for t in tokens[row] if t >= 0 and lane.handle not in failed]
        eos = launched.eos[row]
        if lane.role is LaneRole.PROMPT:
            ids = emitted[:1] if lane.max_advance_tokens else []
            records.append(completion_record(lane, ids, eos, overrun, lane.num_prompt_tokens))
            offered.append(0)
            continue
        rows = verified[row] if d.is_device_allocated else 0
        records.append(completion_record(lane, emitted, eos, overrun, 0, rows))
        is_failed = lane.handle in failed
        offered.append(0 if is_failed else max(0, (verified[row] or lane.query_length) - 1))
    sidecar = survival = None
    if d.proposal_depth > 0:
        confidence = out.confidence  # type: ignore[attr-defined]
        num = len(launched.lanes)
        # the whole [2, B, D] sidecar: Helios validates every request slot's row
        joint = tuple(tuple(r) for r in confidence[1].clamp(0, 1).tolist())
        per_position = tuple(tuple(r) for r in confidence[0].clamp(0, 1).tolist())
        sidecar = ConfidenceSidecar(planes=(joint, per_position))
        rows_survival = out.survival[:num].clamp(0, 1).tolist()  # type: ignore[attr-defined]
        survival = tuple(tuple(rows_survival[i][: offered[i]]) for i in range(num))
    lp = out.logprobs  # type: ignore[attr-defined]
    logprobs = token_logprobs(launched, tokens, lp.logprob, lp.top_ids, lp.top_logprobs)
    return FrameResult(
        tuple(records),
        timing,
        sidecar,
        survival,
        tuple(offered),
        logprobs=logprobs,
        prompt_logprobs=prompt_logprobs(launched.prompt_job, launched.prompt_scores),
        failed=failed,
    )


def completion_record(
    lane: LaneWork,
    ids: list[int],
    eos: frozenset[int],
    overrun: set[RequestHandle],
    num_prompt_tokens: int = 0,
    num_verified: int = 0,
) -> CompletionRecord:
    """The lane's record: its tokens up to its advance and the first EOS."""
    emitted = len(ids)
    ids = ids[: lane.max_advance_tokens] if lane.role is LaneRole.DECODE else ids
    finished = False
    for i, token in enumerate(ids):
        if token in eos:
            ids, finished = ids[: i + 1], True
            break
    if lane.role is LaneRole.DECODE and len(ids) < emitted:
        # The device committed past the reported output (a stop inside an accepted
        # burst): the slot's state no longer matches prompt + output.
        overrun.add(lane.handle)
    return CompletionRecord(
        handle=lane.handle,
        num_prompt_tokens=num_prompt_tokens,
        token_ids=tuple(int(t) for t in ids),
        is_finished=finished,
        num_verified_tokens=num_verified,
    )


def advance_grammars(
    launched: LaunchedFrame, tokens: list[list[int]], failed: dict[RequestHandle, str]
) -> dict[RequestHandle, str]:
    """Advance each constrained lane's matcher; a lane whose token is rejected fails alone."""
    rejected = {}
    for row, (lane, grammar) in enumerate(zip(launched.lanes, launched.grammars, strict=True)):
        if grammar is None or lane.handle in failed:
            continue
        if not all(grammar.accept(t) for t in tokens[row] if t >= 0):
            rejected[lane.handle] = GRAMMAR_REJECTED
    return rejected


def failed_rows(launched: LaunchedFrame, tokens: list[list[int]]) -> dict[RequestHandle, str]:
    """The lanes whose row emitted INVALID_TOKEN (model.sampling), with their message."""
    return {
        lane.handle: NON_FINITE_MESSAGE
        for row, lane in enumerate(launched.lanes)
        if INVALID_TOKEN in tokens[row]
    }


def token_logprobs(launched: LaunchedFrame, tokens, logprob, top_ids, top_logprobs):
    """Per lane that asked for them, the raw logprobs of its emitted tokens."""
    wanted = [i for i, n in enumerate(launched.num_logprobs) if n is not None]
    if not wanted:
        return {}
    chosen, ids, values = logprob.tolist(), top_ids.tolist(), top_logprobs.tolist()
    result = {}
    for row in wanted:
        k = launched.num_logprobs[row]
        emitted = [t for t in tokens[row] if t >= 0]
        result[launched.lanes[row].handle] = tuple(
            TokenLogprob(
                int(token),
                float(chosen[row][j]),
                tuple(zip(ids[row][j][:k], values[row][j][:k], strict=True)),
            )
            for j, token in enumerate(emitted)
        )
    return result
