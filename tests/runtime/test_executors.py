"""Executors registered by graph kind: the worker only routes (issue 26)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ignition.components.program_kinds import GraphKind
from ignition.components.state_programs import STATE_PROGRAMS
from ignition.helios import Fence, LaneRole
from ignition.runtime.executors.base import WorkerError
from ignition.runtime.executors.frames import FrameResult
from ignition.runtime.executors.program import ProgramExecutor
from ignition.runtime.executors.registry import EXECUTORS, executors_for
from ignition.runtime.executors.state_copy import StateCopyExecutor
from ignition.runtime.executors.vision import VisionExecutor
from ignition.runtime.executors.worker import ModelWorker
from tests.runtime.test_worker import lane, live_for, make_worker, plan_for, setup  # noqa: F401

PREFILL = "prefill-b1-d0-w64-p64"


def test_every_graph_kind_has_an_executor():
    assert set(EXECUTORS) == set(GraphKind)


def test_kinds_run_by_one_executor_class_share_one_instance(setup):  # noqa: F811
    by_kind = make_worker(setup).executors
    assert isinstance(by_kind[GraphKind.DECODE], ProgramExecutor)
    assert by_kind[GraphKind.DECODE] is by_kind[GraphKind.MIXED] is by_kind[GraphKind.PREFILL]
    assert isinstance(by_kind[GraphKind.RESTORE], StateCopyExecutor)
    assert by_kind[GraphKind.INIT] is by_kind[GraphKind.SNAPSHOT] is by_kind[GraphKind.RESTORE]
    assert isinstance(by_kind[GraphKind.VISION], VisionExecutor)


def test_every_executor_reads_the_workers_one_context(setup):  # noqa: F811
    worker = make_worker(setup)
    assert {id(e.context) for e in worker.executors.values()} == {id(worker.context)}
    assert executors_for(worker.context).keys() == worker.executors.keys()


class Recording:
    """An executor that records what it was routed."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def launch(self, plan, fence, live):
        self.calls.append(("launch", plan))
        return plan.descriptor.kind, plan

    def wait(self, launched) -> FrameResult:
        self.calls.append(("wait", launched))
        return FrameResult((), None)  # type: ignore[arg-type]


class Routed:
    def __init__(self, plan) -> None:
        self.plan = plan


def test_the_worker_routes_launch_and_wait_by_the_plans_kind(setup):  # noqa: F811
    _, catalog, _, _ = setup
    worker: ModelWorker = make_worker(setup)
    init = next(d for d in STATE_PROGRAMS if d.kind is GraphKind.INIT)
    state_plan = replace(plan_for(catalog, PREFILL, [lane(0, LaneRole.INIT)]), descriptor=init)
    program_plan = plan_for(catalog, PREFILL, [lane(0, LaneRole.PROMPT, 4)])
    state, program = Recording(), Recording()
    worker.executors = {GraphKind.INIT: state, GraphKind.PREFILL: program}
    worker.launch(state_plan, Fence(1), {})
    worker.wait(Routed(program_plan))
    assert state.calls == [("launch", state_plan)]
    assert program.calls and program.calls[0][0] == "wait"


def test_a_state_copy_plan_without_state_operations_is_a_worker_error(setup):  # noqa: F811
    _, catalog, _, _ = setup
    worker = make_worker(setup)  # built without state operations
    init = next(d for d in STATE_PROGRAMS if d.kind is GraphKind.INIT)
    plan = replace(plan_for(catalog, PREFILL, [lane(0, LaneRole.INIT)]), descriptor=init)
    with pytest.raises(WorkerError, match="no prepared state operations"):
        worker.launch(plan, Fence(1), {lane(0, LaneRole.INIT).handle: live_for(0, [5, 6])})
