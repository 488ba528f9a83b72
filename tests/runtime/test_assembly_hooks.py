"""The engine's hooks are assembled in one place: a trace recorder and a fault plan given to
``assemble_engine`` are attached by it, never set on the engine afterwards."""

from __future__ import annotations

import pytest

from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.loop.faults import FaultPlan, FaultyWorker
from ignition.runtime.tracing.hook import TraceHook
from ignition.runtime.tracing.recorder import TraceRecorder
from tests.runtime.tiny import EOS, CharDecoder

pytestmark = pytest.mark.usefixtures("reference_kernels")

OPTIONS = RuntimeOptions(num_slots=2, page_size=64, max_context_tokens=256, speculation="off")


def test_a_trace_recorder_given_to_the_assembly_is_hooked_into_the_loop(model, catalog):
    recorder = TraceRecorder()
    engine = assemble_engine(model, catalog, CharDecoder(), [EOS], OPTIONS, trace=recorder)
    (hook,) = [h for h in engine.hooks if isinstance(h, TraceHook)]
    assert hook.recorder is recorder


def test_a_fault_plan_given_to_the_assembly_wraps_the_worker_and_sets_the_check(model, catalog):
    plan = FaultPlan.parse("step=404")
    engine = assemble_engine(model, catalog, CharDecoder(), [EOS], OPTIONS, faults=plan)
    assert isinstance(engine.worker, FaultyWorker) and engine.worker.plan is plan
    assert engine.fault_hook == plan.check


def test_without_either_the_loop_has_no_trace_hook_and_the_worker_is_bare(model, catalog):
    engine = assemble_engine(model, catalog, CharDecoder(), [EOS], OPTIONS)
    assert not any(isinstance(h, TraceHook) for h in engine.hooks)
    assert not isinstance(engine.worker, FaultyWorker) and engine.fault_hook is None
