"""Issue 40, "Mixed frames at the generation rate" (decide/mixed_width.py): a winning mixed
frame runs at the sibling width whose decoders earn more per ms than a generation frame."""

from __future__ import annotations

from ignition.helios import objective
from ignition.simulate.harness import policy_for, run_policy
from scripts.scheduling_sim.realworld import random_workload, setup_for


def _mixed_widths(name: str) -> list[int]:
    """The verification widths of the mixed frames (a prompt chunk and decoders) of the
    random-token benchmark at c = 8 on 4x H100, on a catalog with wide mixed programs at
    every prompt bucket from 1024 (the benchmark's prompts are 1,024 tokens)."""
    setup = setup_for("qwen38-flash-next-4xh100", 8, 32)
    run = run_policy(name, random_workload(8), setup)
    return [e.width for e in run.executions if e.prompt_tokens and e.decoders]


def test_the_objective_preset_values_width_in_mixed_frames():
    assert objective().mixed_width
    assert not policy_for(("no-mixed-width",), objective()).mixed_width


def test_mixed_frames_carry_their_decoders_at_width_two():
    widths = _mixed_widths("helios+wide1024")
    assert widths and sum(w >= 2 for w in widths) > 0.9 * len(widths)


def test_without_the_rule_mixed_frames_stay_at_width_one():
    widths = _mixed_widths("helios+wide1024+no-mixed-width")
    assert widths and all(w == 1 for w in widths)
