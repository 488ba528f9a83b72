"""The one seam schedulers meet the runtime through."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable

from ignition.components.catalog import Catalog
from ignition.components.descriptor import Descriptor
from ignition.helios.config import PolicyConfig, SpeculationMode
from ignition.helios.plans import ScheduledPlan
from ignition.helios.reports import CompletionReport, GeneratedToken
from ignition.helios.scheduler import Scheduler
from ignition.helios.types import DraftSource, Fence, RequestHandle, RequestSpec, Resources
from ignition.helios.views import (
    CostEstimate,
    PreemptionVictim,
    Programs,
    RequestView,
    ResourceUsage,
    SchedulerStatistics,
)


@runtime_checkable
class SchedulerProtocol(Protocol):
    # -- the decision loop ---------------------------------------------------------

    def admit(self, spec: RequestSpec) -> RequestHandle: ...

    def cancel(self, handle: RequestHandle) -> None: ...

    def advance_to(self, now_ns: int) -> None: ...

    def note_waiting(self, count: int) -> None:
        """How many requests wait for a slot (the slot-pressure rule's input)."""
        ...

    def plan(self) -> ScheduledPlan | None: ...

    def commit(self, plan: ScheduledPlan, fence: Fence) -> None: ...

    def complete(self, fence: Fence, report: CompletionReport) -> list[GeneratedToken]: ...

    def published_output(self, handle: RequestHandle, fence: Fence) -> None: ...

    def limit_drafts(self, handle: RequestHandle, max_drafts: int | None) -> None:
        """The drafts the request's rounds may verify from now on (RequestSpec.max_drafts),
        as the runtime's supplied proposals change."""
        ...

    def offer_drafts(
        self, handle: RequestHandle, offers: Mapping[DraftSource, int | None]
    ) -> DraftSource:
        """What each proposal source can supply for the next round of a request whose
        source the scheduler chooses per round (RequestSpec.proposal_choices); returns
        the source chosen, which the plan's lanes then carry."""
        ...

    # -- queries -------------------------------------------------------------------

    @property
    def now_ns(self) -> int:
        """The scheduler's clock: the last ``advance_to``."""
        ...

    def can_admit(self) -> bool:
        """Whether ``admit`` finds a free request slot now."""
        ...

    def usage(self) -> ResourceUsage: ...

    def request(self, handle: RequestHandle) -> RequestView | None: ...

    def cost_estimate(self, descriptor: Descriptor) -> CostEstimate: ...

    def programs(self) -> Programs: ...

    def statistics(self) -> SchedulerStatistics: ...

    # -- request resources: retirement and preemption --------------------------------

    def retire_without_snapshot(self, handle: RequestHandle) -> None:
        """Drop a pending terminal capture the runtime cannot fund or place."""
        ...

    def preemption_victim(self, blocked: ScheduledPlan) -> PreemptionVictim | None:
        """Who gives way when nothing is in flight and ``blocked``'s commit raised
        ResourceShortage; None: no one can (the pool cannot hold ``blocked``'s requests)."""
        ...

    def preempt(self, handle: RequestHandle) -> None:
        """Retire an idle live request through a terminal snapshot (its pages come back
        when the snapshot completes)."""
        ...

    def can_resume(self, num_prompt_tokens: int, max_output_tokens: int) -> bool:
        """Whether a preempted request readmitted with this prompt and limit fits now."""
        ...


# How an engine's builder makes the scheduler it runs: (catalog, policy, resources, mode).
SchedulerFactory = Callable[[Catalog, PolicyConfig, Resources, SpeculationMode], SchedulerProtocol]


def helios_scheduler(
    catalog: Catalog, policy: PolicyConfig, resources: Resources, speculation: SpeculationMode
) -> SchedulerProtocol:
    """The production scheduler (the default of every engine)."""
    return Scheduler(catalog, policy, resources=resources, speculation=speculation)
