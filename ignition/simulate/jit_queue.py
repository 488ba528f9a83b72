"""The just-in-time second frame slot, a what-if transport (``helios+jit-queue``): the
host fills the second slot only a lead before the frame ahead is expected to end, by
what it knows (that frame's start and Helios's estimate), not by the frame's true end
as ``late-queue`` does (docs/simulate.md, "jit_queue.py")."""

from __future__ import annotations

from collections.abc import Sequence

from ignition.helios import Scheduler
from ignition.simulate.sim_state import Running

JIT_QUEUE_LEAD_NS = 2_000_000  # helios+jit-queue: plan, commit and launch before the end


def plan_at_ns(
    scheduler: Scheduler, running: Sequence[Running], held_ns: int, lead_ns: int
) -> int:
    """The earliest time the host plans its next frame. With a frame running alone and the
    queue open, its expected end (start plus estimate) less ``lead_ns``; with none
    running, ``held_ns`` (the host sleeps to the time it chose while the frame ran, so a
    frame that ended early leaves the device idle until then); with the queue closed
    (completion feedback, an overrun), 0: nothing can be queued, the host plans at the
    completion as it would without the rule."""
    if not running:
        return held_ns
    if scheduler.queue.why_closed() is not None:
        return 0
    last = running[-1]
    return last.start_ns + last.plan.estimated_duration_ns - lead_ns
