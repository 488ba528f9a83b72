"""Issue 10b: ``scripts/scheduling_sim/turn_waits.py`` splits a later turn's time to first
token into its admission, prerequisite, finishing chunk and first decode."""

from __future__ import annotations

from ignition.simulate.devices import H200Roofline
from ignition.simulate.harness import helios_catalog
from ignition.simulate.multiturn import run_retention
from ignition.simulate.multiturn_turns import MultiTurnSpec
from scripts.scheduling_sim.turn_waits import later_turn_waits, recording

SPEC = MultiTurnSpec(
    conversations=2, turns=2, first_prompt=200, turn_prompt=30, output_tokens=4, think_ms=20
)


def test_a_restored_later_turn_is_admitted_then_restored_then_finished_then_decoded():
    catalog = helios_catalog("qwen38", 2, 128, speculation="off")
    with recording() as events:  # SPEC's short histories restore only without the pay-off rule
        run_retention(SPEC, 4, catalog, slots=2, device=H200Roofline(), payoff=False)
    waits = later_turn_waits(events)
    order = ["admit", "state:restore", "finish", "decode"]
    assert all(waits[k][1] == 2 for k in order), waits
    means = [waits[k][0] for k in order]
    assert means == sorted(means), waits
