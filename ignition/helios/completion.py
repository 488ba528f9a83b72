"""Validation of completion records: every lane is checked before anything changes."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ignition.helios.plans import LaneRole, LaneWork, ScheduledPlan
from ignition.helios.reports import CompletionRecord, ConfidenceSidecar
from ignition.helios.state.requests import ScheduledRequest
from ignition.helios.types import RequestHandle, SchedulerError


def _probability(value: float) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and 0.0 <= value <= 1.0


def validate_records(
    plan: ScheduledPlan,
    records: Sequence[CompletionRecord],
    requests: Mapping[RequestHandle, ScheduledRequest],
    sidecar: ConfidenceSidecar | None,
    survival: Sequence[Sequence[float]] | None,
) -> None:
    """Raise SchedulerError naming the first malformed lane; never mutates."""
    d = plan.descriptor
    if len(records) != len(plan.lanes):
        raise SchedulerError(
            f"{d.name}: {len(records)} completion records for {len(plan.lanes)} lanes"
        )
    device = d.is_device_allocated and d.proposal_depth > 0
    if device and sidecar is None:
        raise SchedulerError(
            f"{d.name}: a device-allocated round's completion report must carry its "
            "confidence sidecar"
        )
    if sidecar is not None:
        _validate_sidecar(plan, sidecar)
    if survival is not None and len(survival) != len(plan.lanes):
        raise SchedulerError(f"{d.name}: {len(survival)} survival rows for {len(plan.lanes)} lanes")
    verified_total = 0
    for i, (lane, record) in enumerate(zip(plan.lanes, records, strict=True)):
        where = _Where(plan, i)
        if record.handle != lane.handle:
            raise SchedulerError(f"{where}: record is for {record.handle}")
        request = requests.get(lane.handle)
        orphaned = request is None or not request.is_live
        count = len(record.token_ids)
        if any(isinstance(t, bool) or not isinstance(t, int) or t < 0 for t in record.token_ids):
            raise SchedulerError(f"{where}: token ids must be nonnegative integers")
        if lane.role.is_state_operation:
            if count or record.num_prompt_tokens or record.num_verified_tokens:
                raise SchedulerError(f"{where}: a state operation commits no tokens")
            continue
        if lane.role is LaneRole.PROMPT:
            if record.num_prompt_tokens != lane.num_prompt_tokens:
                raise SchedulerError(
                    f"{where}: consumed {record.num_prompt_tokens} prompt tokens, "
                    f"scheduled {lane.num_prompt_tokens}"
                )
            if count != lane.max_advance_tokens and not orphaned:
                raise SchedulerError(
                    f"{where}: a prompt row publishes {lane.max_advance_tokens} tokens, got {count}"
                )
            continue
        if record.num_prompt_tokens:
            raise SchedulerError(f"{where}: a decode row consumes no prompt tokens")
        if orphaned and count == 0 and record.num_verified_tokens == 0:
            continue  # a cancelled or finished lane may report nothing at all
        rows = _verified_rows(lane, record, device, where)
        verified_total += rows
        if count > rows:
            raise SchedulerError(f"{where}: {count} tokens exceed {rows} verified rows")
        if count == 0 and not orphaned:
            raise SchedulerError(f"{where}: a decode row commits at least one token")
        if request is not None and not orphaned and count > request.remaining_output:
            raise SchedulerError(
                f"{where}: {count} tokens exceed the remaining output {request.remaining_output}"
            )
        if survival is not None:
            row = survival[i]
            if len(row) > max(0, rows - 1) or not all(_probability(v) for v in row):
                raise SchedulerError(
                    f"{where}: survival row must hold probabilities for offered drafts"
                )
    if device and verified_total > d.packed_capacity:
        raise SchedulerError(
            f"{d.name}: device allocated {verified_total} rows above P = {d.packed_capacity}"
        )


class _Where:
    """``"<program> lane <i> (<handle>)"``, formatted when an error message needs it."""

    __slots__ = ("i", "plan")

    def __init__(self, plan: ScheduledPlan, i: int) -> None:
        self.plan, self.i = plan, i

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __str__(self) -> str:
        return f"{self.plan.descriptor.name} lane {self.i} ({self.plan.lanes[self.i].handle})"


def _verified_rows(lane: LaneWork, record: CompletionRecord, device: bool, where: _Where) -> int:
    if not device:
        if record.num_verified_tokens not in (0, lane.query_length):
            raise SchedulerError(
                f"{where}: host fixed {lane.query_length} rows, "
                f"record says {record.num_verified_tokens}"
            )
        return lane.query_length
    if not 1 <= record.num_verified_tokens <= lane.query_length:
        raise SchedulerError(
            f"{where}: device allocation {record.num_verified_tokens} "
            f"outside 1..{lane.query_length}"
        )
    return record.num_verified_tokens


def _validate_sidecar(plan: ScheduledPlan, sidecar: ConfidenceSidecar) -> None:
    """The FP32 sidecar is [2, request_slots, draft_capacity]: two planes, one row per
    request slot B of the program, one finite probability per produced prefix (D)."""
    d = plan.descriptor
    if d.confidence_width != d.proposal_depth or d.proposal_depth == 0:
        raise SchedulerError(f"{d.name}: this program produces no confidence sidecar")
    if len(sidecar.planes) != 2:
        raise SchedulerError(
            f"{d.name}: confidence sidecar needs 2 planes, got {len(sidecar.planes)}"
        )
    for p, plane in enumerate(sidecar.planes):
        if len(plane) != d.batch_capacity:
            raise SchedulerError(
                f"{d.name}: sidecar plane {p} has {len(plane)} rows for "
                f"{d.batch_capacity} request slots"
            )
        for r, row in enumerate(plane):
            if len(row) != d.confidence_width:
                raise SchedulerError(
                    f"{d.name}: sidecar plane {p} row {r} holds {len(row)} values for draft "
                    f"capacity {d.confidence_width}"
                )
            if not all(_probability(v) for v in row):
                raise SchedulerError(
                    f"{d.name}: sidecar plane {p} row {r} = {list(row)}: values must be finite "
                    "probabilities in [0, 1]"
                )
