"""The one seam schedulers meet the runtime through.

Helios (:class:`ignition.helios.scheduler.Scheduler`) and the diagnostic direct
scheduler (:mod:`ignition.direct.scheduler`) both satisfy it, and the engine takes a
scheduler only through it, so ``debug-serve --direct`` chooses a scheduler when the
engine is built instead of swapping one in afterwards. The names follow the seed's
interface (design document, "Planning and the execution queue"); a speculative program
with D > 0 whose device allocates target rows completes through
``complete_packed_round``, and the ``*_with_survival`` variants add the
completion_speculative_survival rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from ignition.components.catalog import Catalog
from ignition.helios.config import PolicyConfig, SpeculationMode
from ignition.helios.scheduler import Scheduler
from ignition.helios.types import (
    CompletionRecord,
    ConfidenceSidecar,
    ExecutionTiming,
    Fence,
    GeneratedToken,
    RequestHandle,
    RequestSpec,
    Resources,
    ScheduledPlan,
)


@runtime_checkable
class SchedulerProtocol(Protocol):
    def admit(self, spec: RequestSpec) -> RequestHandle: ...

    def cancel(self, handle: RequestHandle) -> None: ...

    def advance_to(self, now_ns: int) -> None: ...

    def plan(self) -> ScheduledPlan | None: ...

    def commit(self, plan: ScheduledPlan, fence: Fence) -> None: ...

    def complete(
        self, fence: Fence, records: Sequence[CompletionRecord], timing: ExecutionTiming
    ) -> list[GeneratedToken]: ...

    def complete_with_survival(
        self,
        fence: Fence,
        records: Sequence[CompletionRecord],
        timing: ExecutionTiming,
        survival: Sequence[Sequence[float]],
    ) -> list[GeneratedToken]: ...

    def complete_packed_round(
        self,
        fence: Fence,
        records: Sequence[CompletionRecord],
        timing: ExecutionTiming,
        sidecar: ConfidenceSidecar,
    ) -> list[GeneratedToken]: ...

    def complete_packed_round_with_survival(
        self,
        fence: Fence,
        records: Sequence[CompletionRecord],
        timing: ExecutionTiming,
        sidecar: ConfidenceSidecar,
        survival: Sequence[Sequence[float]],
    ) -> list[GeneratedToken]: ...

    def published_output(self, handle: RequestHandle, fence: Fence) -> None: ...


# How an engine's builder makes the scheduler it runs: (catalog, policy, resources, mode).
SchedulerFactory = Callable[[Catalog, PolicyConfig, Resources, SpeculationMode], SchedulerProtocol]


def helios_scheduler(
    catalog: Catalog, policy: PolicyConfig, resources: Resources, speculation: SpeculationMode
) -> SchedulerProtocol:
    """The production scheduler (the default of every engine)."""
    return Scheduler(catalog, policy, resources=resources, speculation=speculation)
