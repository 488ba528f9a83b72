"""Helios: selects prepared physical graphs by useful value per execution time.

Pure Python over plain data (no torch): the runtime meets it only through
descriptors, plans and completion records.
"""

from __future__ import annotations

from ignition.helios.config import PolicyConfig, SpeculationMode
from ignition.helios.protocol import SchedulerFactory, SchedulerProtocol, helios_scheduler
from ignition.helios.scheduler import Scheduler
from ignition.helios.types import (
    CompletionRecord,
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
)

__all__ = [
    "CompletionRecord",
    "ConfidenceSidecar",
    "ExecutionClass",
    "ExecutionTiming",
    "Fence",
    "GeneratedToken",
    "LaneRole",
    "LaneWork",
    "PolicyConfig",
    "RequestHandle",
    "RequestSpec",
    "ResourceShortage",
    "Resources",
    "ScheduledPlan",
    "Scheduler",
    "SchedulerError",
    "SchedulerFactory",
    "SchedulerProtocol",
    "SelectionReason",
    "SpeculationMode",
    "helios_scheduler",
]
