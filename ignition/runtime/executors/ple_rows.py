"""The PLE n-gram rows a program frame needs, delivered from the host (or disk) residency."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from ignition.compiler.ple_input import PleRowsInput, stage_rows
from ignition.compiler.ple_staging import PleStaging
from ignition.helios import LaneRole, RequestHandle, ScheduledPlan
from ignition.runtime.executors.context import ExecutorContext
from ignition.runtime.ple.delivery import FrameDelivery
from ignition.runtime.ple.mailbox import Delivery

if TYPE_CHECKING:
    from ignition.runtime.requests.table import LiveRequest


def attach_ple(context: ExecutorContext, delivery: FrameDelivery) -> None:
    """Deliver the n-gram table's rows (host / disk residency)."""
    context.ple = delivery
    for program, _ in context.programs.values():
        staged: PleRowsInput | None = getattr(program.inputs, "ple", None)
        if staged is not None:
            staged.is_enabled = True
            staged.resolve = delivery.resolve_inside
            if staged.ids[0].is_cuda and context.ple_staging is None:
                # two queued frames: known rows through alternating pinned sets (the
                # programs share one PLE input, so one staging serves them all)
                context.ple_staging = PleStaging(staged)


def read_pending(
    context: ExecutorContext, plan: ScheduledPlan, live: dict[RequestHandle, LiveRequest]
) -> dict[RequestHandle, tuple[int, ...]]:
    """Decode lanes whose pending token the host has read, with their token history."""
    ledger = context.ledger
    known = {}
    for lane in plan.lanes:
        request = live[lane.handle]
        if (
            lane.role is LaneRole.DECODE
            and request.output_ids
            and not ledger.unread.get(lane.handle)
            and lane.handle not in ledger.overrun
        ):
            known[lane.handle] = (*request.request.prompt_ids, *request.output_ids)
    return known


def prompt_tokens(
    plan: ScheduledPlan, live: dict[RequestHandle, LiveRequest]
) -> dict[RequestHandle, tuple[int, ...]]:
    """The prompt lanes' tokens (replayed output included), whose chunk rows are known."""
    return {
        lane.handle: live[lane.handle].prompt_ids
        for lane in plan.lanes
        if lane.role is LaneRole.PROMPT
    }


def stage_known_rows(
    staged: PleRowsInput | None,
    deliveries: tuple[Delivery, ...],
    rows: list[torch.Tensor],
    delivery_rows: Callable[..., list[tuple[torch.Tensor, torch.Tensor]]],
    double_buffered: PleStaging | None = None,
) -> None:
    """Copy the frame's known rows into the program's PLE input."""
    if staged is None or not staged.is_enabled:
        return
    dtype = staged.rows[0].dtype
    for delivery, values in zip(deliveries, rows, strict=True):
        parts = delivery_rows(delivery, values, dtype)
        if double_buffered is not None:
            double_buffered.stage(staged, parts)
            continue
        for layer, (ids, layer_values) in enumerate(parts):
            stage_rows(staged, layer, ids, layer_values)
