"""Two what-ifs on what Helios's cost model sees (issue 39): ``row-oracle``
(:func:`estimate_at_ready_rows`, an upper bound, not a rule) and ``ple-stall``
(:func:`ple_stall_ns`); docs/simulate.md, "cost_what_ifs.py"."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ignition.components.program_kinds import GraphKind
from ignition.helios import LaneRole, ScheduledPlan, Scheduler

NS_PER_MS = 1_000_000


def estimate_at_ready_rows(
    scheduler: Scheduler, contexts: Sequence[int], duration_ms: Callable[..., float]
) -> None:
    """Sets each measured generation or mixed program's estimate to its device duration
    (``duration_ms``, the simulation's ``_ms``) at the rows it could carry beside the
    ready decoders of cached ``contexts`` (unmeasured programs stay unknown)."""
    per_row = sum(contexts) // max(1, len(contexts))
    costs = scheduler.costs
    for d in scheduler.programs().inference:
        entry = costs.entry(d)
        if d.kind is GraphKind.PREFILL or entry.estimate_ns <= 0:
            continue
        lanes = d.prompt_lanes if d.kind is GraphKind.MIXED else 0
        rows = max(1, min(d.batch_capacity, len(contexts) + lanes))
        decoders = rows - lanes
        prompt = d.prefill_capacity if lanes else 0
        ms = duration_ms(
            d,
            prompt + decoders * d.token_capacity,
            rows,
            per_row * decoders,
            prompt_tokens=prompt,
            draft_rows=decoders,
            row_contexts=(per_row,) * decoders + (0,) * lanes,
        )
        entry.estimate_ns = max(1, round(ms * NS_PER_MS))
    costs.version += 1
    costs.estimates_version += 1  # derived values (normalizers, references) recompute


def ple_stall_ns(device: object, plan: ScheduledPlan, device_ns: int) -> int:
    """The frame's synchronous PLE gather in ns on ``device`` (its decode and verification
    tokens' rows), at most ``device_ns`` - 1 so the sample stays positive; 0 on devices
    without ``ple_delivery_ms``."""
    delivery = getattr(device, "ple_delivery_ms", None)
    if delivery is None:
        return 0
    prompt = sum(lane.num_prompt_tokens for lane in plan.lanes if lane.role is LaneRole.PROMPT)
    tokens = prompt + sum(
        lane.query_length for lane in plan.lanes if lane.role is not LaneRole.PROMPT
    )
    return max(0, min(device_ns - 1, round(delivery(tokens, prompt) * NS_PER_MS)))
