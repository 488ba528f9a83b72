"""One seam for schedulers: Helios and the direct scheduler both satisfy SchedulerProtocol,
and the engine is built around whichever one it is given."""

from __future__ import annotations

import inspect

import pytest
from helios_helpers import MS, decode, prefill, records_for, request, scheduler

import ignition.helios.decide.policy as policy_module
import ignition.helios.scheduler as scheduler_module
from ignition.direct.scheduler import DirectScheduler, direct_scheduler
from ignition.helios import (
    CompletionReport,
    ConfidenceSidecar,
    ExecutionTiming,
    Fence,
    PolicyConfig,
    Resources,
    Scheduler,
    SchedulerError,
    SchedulerProtocol,
    SpeculationMode,
    helios_scheduler,
)
from ignition.helios.protocol import SchedulerProtocol as Seam

# Every callable the protocol declares (its one property, now_ns, is read, not called).
METHODS = sorted(
    name
    for name, member in vars(Seam).items()
    if not name.startswith("_") and inspect.isfunction(member)
)
OLD_COMPLETIONS = (
    "complete_with_survival",
    "complete_packed_round",
    "complete_packed_round_with_survival",
)


def both():
    catalog = scheduler([prefill(64), decode(1)]).catalog
    args = (catalog, PolicyConfig(), Resources(4), SpeculationMode.ADAPTIVE)
    return helios_scheduler(*args), direct_scheduler(*args)


def test_helios_and_the_direct_scheduler_both_satisfy_the_scheduler_protocol():
    helios, direct = both()
    assert isinstance(helios, Scheduler) and isinstance(direct, DirectScheduler)
    assert isinstance(helios, SchedulerProtocol) and isinstance(direct, SchedulerProtocol)


@pytest.mark.parametrize("name", METHODS)
def test_every_protocol_method_has_the_seams_parameters_in_both_schedulers(name):
    wanted = list(inspect.signature(getattr(Seam, name)).parameters)
    for s in both():
        assert list(inspect.signature(getattr(type(s), name)).parameters) == wanted, type(s)


def test_completion_is_one_call_whose_report_carries_the_sidecar_and_survival_rows():
    assert "complete" in METHODS and not set(OLD_COMPLETIONS) & set(METHODS)
    for s in both():
        assert not any(hasattr(s, name) for name in OLD_COMPLETIONS), type(s)


@pytest.mark.parametrize(
    "extra",
    [{}, {"survival": [()]}, {"sidecar": ConfidenceSidecar(((), ()))}],
    ids=["records", "survival", "sidecar"],
)
def test_every_report_goes_through_the_same_validation(extra):
    s = scheduler([prefill(64), decode(1)])
    s.admit(request(64))
    plan = s.plan()
    s.commit(plan, Fence(1))
    report = CompletionReport(records_for(plan), ExecutionTiming(MS), **extra)
    with pytest.raises(SchedulerError, match="fence 9 is not the oldest in flight"):
        s.complete(Fence(9), report)


def test_the_review_dead_code_is_gone():
    assert not hasattr(scheduler_module, "ExplorationLedger")
    assert not hasattr(policy_module, "rank")
    assert not hasattr(scheduler([decode(1)]), "metrics")
