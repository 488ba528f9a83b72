"""Two what-ifs on what Helios's cost model sees (issue 39, random tokens at c = 64;
``docs/scheduling.md``, "Random tokens at c = 64: what the cost model costs").

- ``row-oracle`` (:func:`estimate_at_ready_rows`): before each plan, every measured
  generation or mixed program's estimate becomes the device model's duration at the rows
  it could carry now (min(B, ready decoders + its prompt lanes), at their mean cached
  context). A cost entry holds one median whatever a run's active rows (the spec's
  "active row count does not change its identity"), and on the PLE-on-host profiles a
  frame's cost follows its active rows (313 us of host gather per decode token); this
  is the most an estimate that knew the rows could buy, an upper bound, not a rule.
- ``ple-stall`` (:func:`ple_stall_ns`): each completion reports the frame's synchronous
  PLE gather as ``readiness_stall_ns``, which the scheduler subtracts from its cost
  sample: the spec's "the cost sample subtracts exposed embedding-delivery delay" read
  for the decode tokens' rows too. The default reports none: the device model charges
  that gather inside the step, and the estimate must carry it (measured: without it
  Helios under-prices every token-heavy frame).
"""

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
