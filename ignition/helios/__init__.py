"""Helios: selects prepared physical graphs by useful value per execution time."""

from __future__ import annotations

from ignition.helios.config import (
    PolicyConfig,
    SpeculationMode,
    balanced,
    flat_cadence,
    objective,
    policy_from_preset,
    throughput,
)
from ignition.helios.plans import (
    ExecutionClass,
    LaneRole,
    LaneWork,
    ScheduledPlan,
    SelectionReason,
    TraceEntry,
)
from ignition.helios.protocol import SchedulerFactory, SchedulerProtocol, helios_scheduler
from ignition.helios.reports import (
    CompletionRecord,
    CompletionReport,
    ConfidenceSidecar,
    ExecutionTiming,
    GeneratedToken,
)
from ignition.helios.scheduler import Scheduler
from ignition.helios.trace import trace_to_json
from ignition.helios.types import (
    DraftSource,
    Fence,
    HEAD_DRAFTS,
    RequestHandle,
    RequestSpec,
    ResourceShortage,
    Resources,
    SchedulerError,
)
from ignition.helios.views import (
    CostEstimate,
    PreemptionVictim,
    Programs,
    RequestView,
    ResourceUsage,
    SchedulerStatistics,
)
from ignition.helios.vision_windows import VisionWindow, plan_windows, window_spec

__all__ = [
    "CompletionRecord",
    "CompletionReport",
    "ConfidenceSidecar",
    "CostEstimate",
    "DraftSource",
    "ExecutionClass",
    "ExecutionTiming",
    "Fence",
    "GeneratedToken",
    "HEAD_DRAFTS",
    "LaneRole",
    "LaneWork",
    "PolicyConfig",
    "PreemptionVictim",
    "Programs",
    "RequestHandle",
    "RequestSpec",
    "RequestView",
    "ResourceShortage",
    "ResourceUsage",
    "Resources",
    "ScheduledPlan",
    "Scheduler",
    "SchedulerError",
    "SchedulerFactory",
    "SchedulerProtocol",
    "SchedulerStatistics",
    "SelectionReason",
    "SpeculationMode",
    "TraceEntry",
    "VisionWindow",
    "helios_scheduler",
    "plan_windows",
    "balanced",
    "flat_cadence",
    "objective",
    "policy_from_preset",
    "throughput",
    "trace_to_json",
    "window_spec",
]
