"""Applying a validated completion: service charges, committed state, acceptance."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ignition.helios.config import PolicyConfig
from ignition.helios.plans import LaneRole, ScheduledPlan
from ignition.helios.reports import (
    CompletionRecord,
    ConfidenceSidecar,
    ExecutionTiming,
    GeneratedToken,
)
from ignition.helios.state.queue import Frame
from ignition.helios.state.rates import Normalizers, advance_rates, decay, stream_family
from ignition.helios.state.requests import ScheduledRequest
from ignition.helios.types import Fence, RequestHandle


@dataclass
class Publication:
    """What the first publication of a fence needs to turn zero deliveries into one."""

    fence: int
    decay: float
    duration_ms: float
    had_history: bool
    is_published: bool = False


def charge_service(
    frame: Frame,
    records: Sequence[CompletionRecord],
    timing: ExecutionTiming,
    requests: Mapping[RequestHandle, ScheduledRequest],
    policy: PolicyConfig,
    fallback_norms: Callable[[], Normalizers],
) -> dict[RequestHandle, Publication]:
    """Update every participant's rates; returns the publications this frame allows."""
    publications: dict[RequestHandle, Publication] = {}
    if timing.device_ns <= 0:
        for lane, rec in zip(frame.plan.lanes, records, strict=True):
            if rec.token_ids:
                publications[lane.handle] = Publication(frame.fence, 1.0, 0.0, False)
        return publications
    interval_ns = timing.device_ns if frame.was_queued else max(timing.device_ns, timing.wall_ns)
    duration_ms = interval_ns / 1e6
    norms = frame.norms if frame.norms.token_rate is not None else fallback_norms()
    served = {lane.handle: rec for lane, rec in zip(frame.plan.lanes, records, strict=True)}
    a = decay(duration_ms, policy.adaptation_ms)
    for p in frame.participants:
        r = requests.get(p.handle)
        if r is None or r.is_cancelled:
            continue  # a cancelled handle never charges its slot's next owner
        rec = served.get(p.handle)
        tokens = 0 if rec is None else rec.num_prompt_tokens + len(rec.token_ids)
        had_history = r.rates.delivery_rate is not None
        r.rates = advance_rates(
            r.rates,
            duration_ms=duration_ms,
            tokens=tokens,
            deliveries=0.0,
            norms=norms.for_family(stream_family(r.spec.family)),
            is_decoder=p.was_decoder,
            adaptation_ms=policy.adaptation_ms,
            prompt_tokens=r.spec.uncached_prompt_tokens,
        )
        if rec is not None and rec.token_ids:
            publications[p.handle] = Publication(frame.fence, a, duration_ms, had_history)
    return publications


def apply_lane(
    r: ScheduledRequest,
    plan: ScheduledPlan,
    i: int,
    record: CompletionRecord,
    fence: Fence,
    sidecar: ConfidenceSidecar | None,
    survival: Sequence[Sequence[float]] | None,
    now_ns: int,
) -> list[GeneratedToken]:
    """Commit one live lane by its phase and return its generated tokens."""
    d = plan.descriptor
    lane = plan.lanes[i]
    n = len(record.token_ids)
    if lane.role is LaneRole.PROMPT:
        r.prompt_position += record.num_prompt_tokens
        if r.is_decoder and r.last_output_ns < 0:
            r.last_output_ns = now_ns  # output age starts when decoding becomes possible
    elif d.speculation_enabled and d.proposal_depth > 0:
        rows = record.num_verified_tokens or lane.query_length
        r.acceptance.observe_round(
            lane.proposal_source,  # the round's source, which a choosing request changes
            num_offered_drafts=rows - 1,
            num_accepted_drafts=max(0, n - 1),
            is_terminated=record.is_finished or n >= r.remaining_output,
            survival=None if survival is None else survival[i],
            num_generated_tokens=n,
        )
        if sidecar is not None:
            ceiling = min(d.verify_rows, lane.query_length)
            r.forecast.observe(sidecar.joint_prefix(i), ceiling, n)
    first = r.num_output
    r.num_output += n
    if record.is_finished or r.remaining_output <= 0 or r.remaining_context <= 0:
        r.is_finished = True
    return [
        GeneratedToken(r.handle, t, first + k, fence, is_last=r.is_finished and k == n - 1)
        for k, t in enumerate(record.token_ids)
    ]
