"""Helios: selects prepared physical graphs by useful value per execution time.

Pure Python over plain data (no torch): the runtime meets it only through
descriptors, plans and completion reports, and imports only what this module exports
(tests/helios/test_protocol_boundary.py holds it to that).
"""

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
from ignition.helios.protocol import SchedulerFactory, SchedulerProtocol, helios_scheduler
from ignition.helios.scheduler import Scheduler
from ignition.helios.trace import trace_to_json
from ignition.helios.types import (
    CompletionRecord,
    CompletionReport,
    ConfidenceSidecar,
    ExecutionClass,
    ExecutionTiming,
    Fence,
    GeneratedToken,
    LaneRole,
    LaneWork,
    RequestHandle,
    RequestSpec,
    Resources,
    ResourceShortage,
    ScheduledPlan,
    SchedulerError,
    SelectionReason,
    TraceEntry,
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
    "ExecutionClass",
    "ExecutionTiming",
    "Fence",
    "GeneratedToken",
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
