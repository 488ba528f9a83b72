"""Helios at one fixed verification width (issue 12: "adaptive speculation never below the
best fixed width at any load" needs Helios itself at each fixed width, on its own catalog)."""

from __future__ import annotations

import pytest

from ignition.components.program_kinds import GraphKind
from ignition.simulate.baselines import PolicyError, describe, parse_policy, width_variant
from ignition.simulate.harness import Setup, helios_catalog, run_policy
from ignition.simulate.workloads import AcceptanceModel, poisson, with_acceptance

GENERATION = (GraphKind.DECODE, GraphKind.SPECULATIVE, GraphKind.MIXED)


def test_w_n_names_a_fixed_width_and_other_suffixes_stay_unknown():
    assert width_variant("w3") == 3 and width_variant("w") is None
    assert parse_policy("helios+w3+trained").extras["variants"] == ("w3", "trained")
    assert "verification width 3" in describe("helios+w3")
    with pytest.raises(PolicyError, match="unknown Helios variant 'w0'"):
        parse_policy("helios+w0")


def test_a_fixed_width_catalog_keeps_prefill_and_only_host_allocated_programs_of_that_width():
    adaptive = helios_catalog("qwen38", 32, 128)
    fixed = helios_catalog("qwen38", 32, 128, width=3)
    generation = [d for d in fixed.descriptors if d.kind in GENERATION]
    assert generation and {d.token_capacity for d in generation} == {3}
    assert not any(d.is_device_allocated for d in fixed.descriptors)
    prefill = {d.name for d in adaptive.descriptors if d.kind is GraphKind.PREFILL}
    assert {d.name for d in fixed.descriptors if d.kind is GraphKind.PREFILL} == prefill
    # the seed's balanced bucket and the recipe's 8-slot step bucket 1024 (issue 40)
    assert {d.prefill_capacity for d in generation if d.kind is GraphKind.MIXED} == {512, 1024}


def test_a_width_the_envelope_leaves_out_at_the_full_batch_is_absent_there():
    fixed = helios_catalog("qwen38", 32, 128, width=5)  # 32 x 5 = 160 > R = 128
    batches = {d.batch_capacity for d in fixed.descriptors if d.kind is GraphKind.SPECULATIVE}
    assert 32 not in batches and 16 in batches


def test_fixed_width_helios_verifies_every_decoder_at_that_width():
    requests = with_acceptance(
        poisson(20.0, 12, prompt_tokens=(64, 300), output_tokens=(20, 40), seed=5),
        AcceptanceModel((0.8, 0.7, 0.6)),
    )
    run = run_policy("helios+w3", requests, Setup(slots=4, speculative_token_capacity=12))
    assert run.finished == len(requests)
    generation = [e for e in run.executions if e.decoders]
    assert generation
    # a lane shorter than 3 only where the request had fewer than 3 tokens left
    assert {e.width for e in generation} <= {1, 2, 3}
    assert sum(e.width == 3 for e in generation) > 0.8 * len(generation)


def test_trained_preseeds_the_true_prefix_survivals_not_the_conditional_probabilities():
    # Helios's per-depth estimates are prefix survivals (the first d drafts all accepted)
    from ignition.simulate.harness import helios_simulation, true_survivals

    assert true_survivals((0.8, 0.5, 0.5)) == pytest.approx((0.8, 0.4, 0.2))
    requests = with_acceptance(
        poisson(20.0, 2, prompt_tokens=(64, 65), output_tokens=(5, 6), seed=1),
        AcceptanceModel((0.8, 0.5, 0.5)),
    )
    sim = helios_simulation(
        requests, Setup(slots=4, speculative_token_capacity=12), "helios+trained"
    )
    assert sim.scenario.requests[0].acceptance_prior == pytest.approx((0.8, 0.4, 0.2))


def _queued_ahead_ms(policy: str) -> list[float]:
    """How long before its start each frame was committed (time spent queued)."""
    from ignition.simulate.harness import helios_simulation

    requests = with_acceptance(
        poisson(40.0, 10, prompt_tokens=(64, 300), output_tokens=(30, 60), seed=2),
        AcceptanceModel((0.8, 0.7, 0.6)),
    )
    sim = helios_simulation(requests, Setup(slots=4, speculative_token_capacity=12), policy)
    waits: list[float] = []
    complete = sim._complete

    def watch(run, now):
        waits.append((run.start_ns - run.commit_ns) / 1e6)
        complete(run, now)

    sim._complete = watch
    sim._loop()
    assert all(r.finish_ms is not None for r in sim.streams)
    return waits


def test_late_queue_fills_the_second_slot_only_a_host_round_trip_before_the_frame_ahead_ends():
    from ignition.simulate.harness import LATE_QUEUE_LEAD_NS

    assert max(_queued_ahead_ms("helios")) > 2.0  # the default fills it at once
    assert max(_queued_ahead_ms("helios+late-queue")) <= LATE_QUEUE_LEAD_NS / 1e6 + 1e-6
