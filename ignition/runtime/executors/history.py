"""The device sampling history behind penalties, logit bias and min_tokens."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ignition.compiler.staging import HostFrame
from ignition.helios import LaneWork, RequestHandle
from ignition.model.logits_processing import MAX_LOGIT_BIAS, MAX_STOP_IDS
from ignition.runtime.executors.base import WorkerError
from ignition.runtime.executors.context import ExecutorContext

if TYPE_CHECKING:
    from ignition.runtime.requests.table import LiveRequest


def history_start(
    live: LiveRequest, eos_token_ids: frozenset[int]
) -> tuple[tuple[tuple[int, float], ...], list[int]]:
    """A request's logit bias and the ids min_tokens masks, as the begin buffers bound them."""
    sampling = live.request.sampling
    bias = tuple(sampling.logit_bias)
    if len(bias) > MAX_LOGIT_BIAS:
        raise WorkerError(f"{len(bias)} logit_bias entries; at most {MAX_LOGIT_BIAS}")
    stop_ids: list[int] = []
    if sampling.min_tokens:
        stops = set(sampling.stop_token_ids)
        if not sampling.ignore_eos:
            stops |= eos_token_ids
        stop_ids = sorted(stops)[:MAX_STOP_IDS]
    return bias, stop_ids


def bind_begin(
    frame: HostFrame, row: int, live: LiveRequest, eos_token_ids: frozenset[int], lane: int = 0
) -> None:
    """Start the request's device sampling history in this frame, in prompt lane ``lane``."""
    frame["history_begin"][lane] = row
    bias, stop_ids = history_start(live, eos_token_ids)
    if bias:
        first = lane * MAX_LOGIT_BIAS
        frame["bias_ids"][first : first + len(bias)] = [t for t, _ in bias]
        frame["bias_values"][first : first + len(bias)] = [b for _, b in bias]
    if stop_ids:
        first = lane * MAX_STOP_IDS
        frame["stop_ids"][first : first + len(stop_ids)] = stop_ids


def restore_history(context: ExecutorContext, lane: LaneWork, live: LiveRequest) -> None:
    """A restored request starts its sampling history from the restored tokens."""
    history = context.sampling_history()
    if history is None or lane.handle in context.ledger.begun:
        return
    restored = live.prompt_ids[: lane.checkpoint_tokens]
    boundary = min(len(live.request.prompt_ids), len(restored))
    bias, stop_ids = history_start(live, context.eos_token_ids)
    history.rebuild_row(lane.handle.slot, restored[:boundary], restored[boundary:], bias, stop_ids)
    context.ledger.begun.add(lane.handle)


def carry_history(context: ExecutorContext, old: RequestHandle, new: RequestHandle) -> None:
    """``new`` (the next vision window) keeps ``old``'s sampling history."""
    history = context.sampling_history()
    if history is not None and old.slot != new.slot:
        history.copy_row(old.slot, new.slot)
    context.ledger.begun.add(new)
