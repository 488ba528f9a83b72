"""Issue 40's simulator pieces: preset and rule variants, per-request verification
widths, and the two-class workload (``scripts/scheduling_sim/two_class.py``)."""

from __future__ import annotations

import pytest

from ignition.helios import PolicyConfig, balanced, flat_cadence, objective, throughput
from ignition.simulate.baselines import PolicyError, parse_policy
from ignition.simulate.harness import Setup, policy_for, run_policy
from ignition.simulate.devices import device_from_spec
from scripts.scheduling_sim import two_class


def test_helios_runs_the_default_preset_and_variants_select_the_others():
    assert Setup().helios_policy == objective()
    assert policy_for(("balanced",), objective()) == balanced()
    assert policy_for(("throughput",), objective()) == throughput()
    assert policy_for(("balanced", "tbt80"), objective()).tbt_target_ms == 80.0
    assert policy_for(("no-tbt",), objective()).tbt_target_ms == 0.0
    assert policy_for(("balanced", "gen-left-out"), objective()).generation_left_out
    assert policy_for(("flat-cadence",), objective()) == flat_cadence()
    assert policy_for(("flat-cadence", "ramp2"), objective()).cadence_ramp == 2.0
    assert policy_for(("ramp0",), objective()).cadence_ramp == 0.0
    assert policy_for((), PolicyConfig()) == PolicyConfig()
    before = policy_for(("no-twin", "no-prompt-runs"), objective())
    assert not before.prompt_runs and not before.generation_twin  # the rules' before column
    assert policy_for(("balanced", "prompt-runs", "twin"), objective()) == PolicyConfig(
        prompt_runs=True, generation_twin=True
    )


def test_an_unknown_variant_is_one_line_naming_it():
    with pytest.raises(PolicyError, match="tbtx"):
        parse_policy("helios+tbtx")


def test_a_record_counts_its_rounds_and_verified_rows():
    setup = Setup(slots=4, speculative_token_capacity=8, device=device_from_spec("h200"))
    run = run_policy("vllm-k1", two_class.workload(4, prompt=64, output=16), setup)
    for r in run.requests:
        assert r.rounds > 0 and r.mean_width == pytest.approx(2.0)


def test_the_two_class_workload_alternates_the_classes():
    requests = two_class.workload(4)
    assert [r.acceptance[0] for r in requests] == [0.9, 0.35, 0.9, 0.35]
    assert all(r.arrival_ms == 0.0 for r in requests)


def test_two_class_reports_each_class_width():
    got = two_class.one("vllm-adaptive", "h200", 8, 4, 8)
    assert got["high"][0] > got["low"][0] >= 1.0  # confidence widens the 0.9 class


def test_the_simulator_tells_helios_how_many_requests_wait_for_a_slot():
    """The slot-pressure input (Scheduler.note_waiting): arrived requests the full slots
    keep out, falling to zero as they are admitted; ``helios+slotN`` sets the weight."""
    from ignition.simulate.harness import helios_simulation

    assert policy_for(("slot8",), objective()).slot_pressure == 8.0
    setup = Setup(slots=2, speculative_token_capacity=8, device=device_from_spec("h200"))
    sim = helios_simulation(two_class.workload(6, prompt=64, output=8), setup, "helios+slot2")
    assert sim.scheduler.policy.slot_pressure == 2.0
    seen: list[int] = []
    note = sim.scheduler.note_waiting
    sim.scheduler.note_waiting = lambda n: (seen.append(n), note(n))[1]
    sim.run()
    assert max(seen) == 4 and seen[-1] == 0  # six at time zero, two slots


def test_two_class_frame_breakdown_accounts_for_every_frame_and_token():
    """``two_class --frames``: every execution belongs to one program row and every
    delivered token to the frame that ended when it was published."""
    setup = Setup(slots=4, speculative_token_capacity=8, device=device_from_spec("h200"))
    run = run_policy("helios", two_class.workload(8, prompt=64, output=16), setup)
    shares, probes = two_class.frame_breakdown(run)
    assert sum(s.frames for s in shares) == len(run.executions)
    assert sum(s.output_tokens for s in shares) == sum(
        n for r in run.requests for _, n in r.deliveries
    )
    assert [s.device_ms for s in shares] == sorted((s.device_ms for s in shares), reverse=True)
    assert 0 <= probes <= len(run.executions)
    lines = two_class.frame_lines("helios", shares, probes)
    assert lines[0].startswith("`helios`: ") and shares[0].graph in lines[4]


def test_two_class_watch_reports_both_classes():
    from scripts.scheduling_sim import two_class_watch

    lines = two_class_watch.watch("qwen38-flash-next-h200", "helios", 2_000.0, shown=2)
    assert lines[0].startswith("t = ")
    assert any("class 0.9:" in line for line in lines)
    assert any("class 0.35:" in line for line in lines)


def test_two_class_bound_splits_residents_by_lifetime():
    """``two_class_bound``: a class delivering more tokens a round holds fewer of the 32
    slots, and with equal widths the ragged and rectangular programs are the same."""
    from scripts.scheduling_sim import two_class_bound as bound

    assert bound.expected_tokens(0.9, 2) == pytest.approx(1.9)
    found = {(p.high_width, p.low_width, p.program): p for p in bound.points("h200", 3)}
    assert found[(1, 1, "ragged")].high_residents == pytest.approx(16.0)
    assert found[(2, 1, "ragged")].high_residents == pytest.approx(32 * 1.0 / (1.0 + 1.9))
    for (wh, wl, program), p in found.items():
        if wh == wl and program == "ragged":
            rect = found[(wh, wl, "rectangular")]
            assert p.tokens_per_ms == pytest.approx(rect.tokens_per_ms)
