"""The just-in-time second frame slot, a what-if transport (``helios+jit-queue``): the
host fills the second slot only a lead before the frame ahead is expected to end, by
what it knows (that frame's start and Helios's estimate), not by the frame's true end
as ``late-queue`` does (docs/simulate.md, "jit_queue.py")."""

from __future__ import annotations

from collections.abc import Sequence

from ignition.helios import Scheduler
from ignition.simulate.sim_state import Running

JIT_QUEUE_LEAD_NS = 2_000_000  # helios+jit-queue: plan, commit and launch before the end
JIT_WAKE_PLAN_NS = 1_150_000  # helios+jit-wake: the plan after an early completion (p50)


def plan_at_ns(
    scheduler: Scheduler,
    running: Sequence[Running],
    held_ns: int,
    lead_ns: int,
    now_ns: int,
    wake_ns: int | None = None,
) -> int:
    """The earliest time the host plans its next frame. With a frame running alone and the
    queue open, its expected end (start plus estimate) less ``lead_ns``; with the queue
    closed (completion feedback, an overrun), 0: nothing can be queued, the host plans at
    the completion as it would without the rule. With none running, ``held_ns``: the host
    sleeps to the time it chose while the frame ran, so a frame that ended early leaves
    the device idle until then; or, with ``wake_ns`` (the host waits on the completion
    too), at most ``wake_ns`` after the completion seen at ``now_ns`` (its plan)."""
    if not running:
        return held_ns if wake_ns is None else min(held_ns, now_ns + wake_ns)
    if scheduler.queue.why_closed() is not None:
        return 0
    last = running[-1]
    return last.start_ns + last.plan.estimated_duration_ns - lead_ns
