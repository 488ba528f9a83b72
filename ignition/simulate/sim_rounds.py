"""Device-allocated speculative rounds in the simulator: how a frame's rows go to its
lanes by the drafter's confidence, and the confidence sidecar reported back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ignition.helios import ConfidenceSidecar, RequestHandle, ScheduledPlan
from ignition.simulate.acceptance import Round


def device_rows(plan: ScheduledPlan, rounds: Mapping[RequestHandle, Round]) -> list[int]:
    """Device allocation: the best causal frontier by the drafter's confidence (the
    prefix survival of its signal, the one the adaptive baselines read too)."""
    rows = [1] * len(plan.lanes)
    frontier = []
    for i, lane in enumerate(plan.lanes):
        round_ = rounds.get(lane.handle)
        joint = round_.survival() if round_ is not None else ()
        for depth in range(1, lane.query_length):
            p = joint[depth - 1] if depth <= len(joint) else 0.0
            frontier.append((-p, depth, lane.handle.slot, i))
    for _, _, _, i in sorted(frontier)[: plan.descriptor.packed_capacity - len(rows)]:
        rows[i] += 1
    return rows


def confidence_sidecar(
    plan: ScheduledPlan, rounds: Mapping[RequestHandle, Round]
) -> ConfidenceSidecar:
    """Each lane's prefix survival and conditional confidence, padded to the program's
    depth, unused rows zero."""
    d = plan.descriptor
    width = d.proposal_depth
    unused = [(0.0,) * width] * (d.batch_capacity - len(plan.lanes))
    signals = [rounds.get(lane.handle) for lane in plan.lanes]
    joint = [_padded(r.survival() if r else (), width) for r in signals]
    cond = [_padded(r.signal if r else (), width) for r in signals]
    joint, cond = joint + unused, cond + unused
    return ConfidenceSidecar((tuple(joint), tuple(cond)))


def _padded(values: Sequence[float], width: int) -> tuple[float, ...]:
    return tuple((list(values) + [0.0] * width)[:width])
