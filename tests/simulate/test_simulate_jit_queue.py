"""Issue 39, the just-in-time second frame slot (``helios+jit-queue``,
simulate/jit_queue.py): the host fills the second slot only a lead before the frame
ahead is expected to end by Helios's estimate, so a prompt ready mid-frame is planned
into the next frame; when the estimate overshoots, the device idles until that plan."""

from __future__ import annotations

import pytest

from ignition.simulate import sim as sim_module
from ignition.simulate.harness import Setup, helios_simulation
from ignition.simulate.jit_queue import JIT_QUEUE_LEAD_NS, JIT_WAKE_PLAN_NS
from ignition.simulate.workloads import SimRequest

ACCEPTANCE = (0.8, 0.7, 0.6)


def _run(policy: str, late_arrival_ms: float | None = None):
    """Three decoders from time 0 (and a 300-token prompt arriving at
    ``late_arrival_ms``); returns the simulation and its frames in completion order."""
    requests = [SimRequest(0.0, 64, 200, acceptance=ACCEPTANCE) for _ in range(3)]
    if late_arrival_ms is not None:
        requests.append(SimRequest(late_arrival_ms, 300, 5, acceptance=ACCEPTANCE))
    sim = helios_simulation(requests, Setup(slots=4, speculative_token_capacity=6), policy)
    runs = []
    complete = sim._complete

    def watch(run, now):
        runs.append(run)
        complete(run, now)

    sim._complete = watch
    sim._loop()
    assert all(s.record.finish_ms is not None for s in sim.streams)
    return sim, runs


def _running_at(runs, t_ms: float):
    return next(r for r in runs if r.start_ns / 1e6 <= t_ms < r.end_ns / 1e6)


def test_a_prompt_ready_mid_frame_starts_in_the_next_frame_not_behind_a_queued_one():
    # 395 ms: decode rounds of about 8.5 ms, the one running began at 392.7 ms and
    # ends at 401.4 ms; by default its successor was queued at 392.7 ms already
    _, default_runs = _run("helios+at-once", 395.0)
    sim, runs = _run("helios+jit-queue", 395.0)
    late = next(s for s in sim.streams if s.index == 3).record
    assert late.prompt_start_ms == pytest.approx(_running_at(runs, 395.0).end_ns / 1e6)
    running = _running_at(default_runs, 395.0)
    queued = next(r for r in default_runs if r.start_ns == running.end_ns)
    assert queued.commit_ns < 395e6  # at once: queued before the prompt arrived
    default_late = helios_late_start(default_runs, 395.0)
    assert default_late > running.end_ns / 1e6


def helios_late_start(runs, arrival_ms: float) -> float:
    """When the first frame with a prompt lane of the late request began."""
    return min(
        r.start_ns / 1e6
        for r in runs
        if r.start_ns / 1e6 >= arrival_ms and r.plan.prompt_rows
    )


def test_the_device_idles_until_the_plan_when_a_frame_ends_before_its_estimate(monkeypatch):
    real = sim_module.sample_ns
    monkeypatch.setattr(sim_module, "sample_ns", lambda *a: real(*a) // 2)  # half the estimate
    _, default_runs = _run("helios+at-once")
    assert all(b.start_ns == a.end_ns for a, b in zip(default_runs, default_runs[1:]))
    _, runs = _run("helios+jit-queue")
    idle = [(a, b) for a, b in zip(runs, runs[1:]) if b.start_ns > a.end_ns]
    assert idle  # until the completions teach Helios the shorter cost
    for a, b in idle:  # the host planned at the estimated end less the lead, not at a's end
        assert b.start_ns == a.start_ns + a.plan.estimated_duration_ns - JIT_QUEUE_LEAD_NS


def test_a_host_that_also_waits_on_the_completion_plans_right_after_an_early_end(monkeypatch):
    real = sim_module.sample_ns
    monkeypatch.setattr(sim_module, "sample_ns", lambda *a: real(*a) // 2)
    _, runs = _run("helios+jit-wake")
    idle = [(a, b) for a, b in zip(runs, runs[1:]) if b.start_ns > a.end_ns]
    assert idle
    for a, b in idle:  # the plan's cost after the completion, or the planned time if sooner
        planned = a.start_ns + a.plan.estimated_duration_ns - JIT_QUEUE_LEAD_NS
        assert b.start_ns == min(planned, a.end_ns + JIT_WAKE_PLAN_NS)
    assert any(b.start_ns == a.end_ns + JIT_WAKE_PLAN_NS for a, b in idle)


def test_the_lead_variant_is_the_waking_host_at_that_lead(monkeypatch):
    """``helios+jit5ms`` (RuntimeOptions.queue_lead_ms = 5): planned 5 ms before the
    estimated end, or the plan's cost after an early completion."""
    real = sim_module.sample_ns
    monkeypatch.setattr(sim_module, "sample_ns", lambda *a: real(*a) // 4)  # 5 ms early
    _, runs = _run("helios+jit5ms")
    idle = [(a, b) for a, b in zip(runs, runs[1:]) if b.start_ns > a.end_ns]
    assert idle
    for a, b in idle:
        planned = a.start_ns + a.plan.estimated_duration_ns - 5_000_000
        assert b.start_ns == min(planned, a.end_ns + JIT_WAKE_PLAN_NS)


def test_helios_runs_the_runtimes_default_just_in_time_slot_and_at_once_is_the_rule_before(
    monkeypatch,
):
    """The simulator's ``helios`` is the runtime's default transport
    (RuntimeOptions.queue_lead_ms = 5, the waking host); ``helios+at-once`` fills the
    second slot as soon as it is free, as before."""
    from ignition.runtime.loop.second_slot import DEFAULT_QUEUE_LEAD_MS

    real = sim_module.sample_ns
    monkeypatch.setattr(sim_module, "sample_ns", lambda *a: real(*a) // 4)
    _, runs = _run("helios")
    _, lead = _run(f"helios+jit{DEFAULT_QUEUE_LEAD_MS:g}ms")
    assert [(r.start_ns, r.end_ns) for r in runs] == [(r.start_ns, r.end_ns) for r in lead]
    assert any(b.start_ns > a.end_ns for a, b in zip(runs, runs[1:]))
    _, at_once = _run("helios+at-once")
    assert all(b.start_ns == a.end_ns for a, b in zip(at_once, at_once[1:]))
