"""One list of state programs (issue 10): the programs the runtime prepares
(compiler/state_ops.py) are the ones every catalog Helios schedules from lists, the
runtime's and the simulators' alike; the benchmark catalog once lacked initialization."""

from __future__ import annotations

from ignition.compiler.graph import GraphCapturer
from ignition.compiler.state_ops import StateOperations
from ignition.components.program_kinds import GraphKind
from ignition.components.state_programs import STATE_PROGRAMS, state_programs
from ignition.helios import Scheduler
from ignition.model.config import ModelConfig
from ignition.model.state import ModelState
from scripts.scheduling_sim.plan_bench import runtime_catalog

STATE_KINDS = {GraphKind.SNAPSHOT, GraphKind.RESTORE, GraphKind.INIT}


def _prepared_kinds() -> set[GraphKind]:
    state = ModelState.allocate(ModelConfig.tiny(), 2, 5, 8, 2)
    ops = StateOperations(state, num_rows=1, capturer=GraphCapturer("cpu"))
    assert {p.name for p in ops.programs.values()} == {d.name for d in ops.programs}
    return {d.kind for d in ops.programs}


def test_the_runtime_prepares_exactly_the_listed_state_programs():
    assert _prepared_kinds() == {d.kind for d in STATE_PROGRAMS} == STATE_KINDS


def test_the_benchmark_catalog_schedules_every_prepared_state_program():
    catalog, mode = runtime_catalog("off")
    s = Scheduler(catalog, speculation=mode)
    assert {d.kind for d in s.state_descriptors} == _prepared_kinds()


def test_the_simulator_leaves_out_only_initialization_when_asked():
    assert set(state_programs(initialize=True)) == set(STATE_PROGRAMS)
    assert {d.kind for d in state_programs(initialize=False)} == STATE_KINDS - {GraphKind.INIT}
