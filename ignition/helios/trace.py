"""The decision trace: one entry per committed plan, exportable by a server or the simulator."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from ignition.helios.plans import ScheduledPlan, TraceEntry


def trace_entry(plan: ScheduledPlan, fence: int, now_ns: int) -> TraceEntry:
    d = plan.descriptor
    lanes = tuple(
        {
            "slot": lane.handle.slot,
            "generation": lane.handle.generation,
            "role": lane.role.value,
            "prompt_tokens": lane.num_prompt_tokens,
            "query_length": lane.query_length,
            "expected_output_tokens": round(lane.expected_output_tokens, 6),
        }
        for lane in plan.lanes
    )
    return TraceEntry(
        fence=fence,
        time_ns=now_ns,
        kind=d.kind.value,
        batch_capacity=d.batch_capacity,
        proposal_depth=d.proposal_depth,
        token_capacity=d.token_capacity,
        packed_capacity=d.packed_capacity,
        prefill_capacity=d.prefill_capacity,
        lanes=lanes,
        estimated_duration_ns=plan.estimated_duration_ns,
        observation_age_ns=plan.observation_age_ns,
        value_rate=plan.selection_value_rate(),
        log_scale=plan.selection_log_scale(),
        reason=plan.reason.value,
        exploration_credit=plan.exploration_credit,
        execution_class=plan.execution_class.value,
    )


def trace_to_json(entry: TraceEntry) -> dict[str, Any]:
    data = {f.name: getattr(entry, f.name) for f in fields(entry)}
    data["lanes"] = [dict(lane) for lane in entry.lanes]
    return data
