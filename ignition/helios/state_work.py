"""Commit checks and completion of state-operation lanes (init, restore, snapshot,
terminal, vision)."""

from __future__ import annotations

from collections.abc import Sequence

from ignition.helios.plans import LaneRole, LaneWork
from ignition.helios.state.requests import ScheduledRequest
from ignition.helios.types import SchedulerError


def checkpoint_tokens(r: ScheduledRequest, role: LaneRole, restore_only: bool = False) -> int:
    """The context length a state lane restores or captures (0 for inference lanes)."""
    if role is LaneRole.RESTORE:
        return r.spec.restore_tokens
    if restore_only or role is LaneRole.INIT:
        return 0
    if role is LaneRole.SNAPSHOT:
        return r.prompt_position
    if role is LaneRole.TERMINAL:
        return max(0, r.context_tokens - 1)  # the last sampled token is not in the state
    return 0


def check_state_lane(r: ScheduledRequest, lane: LaneWork, inflight: Sequence[LaneWork]) -> None:
    where = f"{lane.handle} ({lane.role.value})"
    if inflight:
        raise SchedulerError(f"{where}: a state operation needs the request idle")
    if lane.role is LaneRole.RESTORE:
        if not r.is_live or not r.needs_restore:
            raise SchedulerError(f"{where}: the request has no pending restore")
    elif lane.role is LaneRole.INIT:
        if not r.is_live or not r.needs_init:
            raise SchedulerError(f"{where}: the request needs no initialization")
    elif lane.role is LaneRole.VISION:
        if not r.is_live or not r.needs_vision:
            raise SchedulerError(f"{where}: the request has no pending vision work")
    elif lane.role is LaneRole.SNAPSHOT:
        if not r.is_live or r.needs_restore or r.pending_capture is None:
            raise SchedulerError(f"{where}: the request stands at no pending capture")
    elif not r.is_terminal_pending:
        raise SchedulerError(f"{where}: the request has no pending terminal retirement")


def apply_state_lane(r: ScheduledRequest, lane: LaneWork) -> None:
    """Apply a completed state lane; a cancelled request keeps only its ownership."""
    if lane.role is LaneRole.TERMINAL:
        r.terminal_since_ns = -1
        return
    if not r.is_live:
        return
    if lane.role is LaneRole.VISION:
        r.is_vision_ready = True
    elif lane.role is LaneRole.INIT:
        r.is_initialized = True
    elif lane.role is LaneRole.RESTORE:
        r.is_restored = True
        r.prompt_position = r.spec.restore_tokens
    elif lane.role is LaneRole.SNAPSHOT:
        r.captured.add(r.prompt_position)
