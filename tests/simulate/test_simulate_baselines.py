"""Baseline policies behind one interface, on the same device and slots (issue 12 item 4)."""

from __future__ import annotations

import pytest

from ignition.simulate.baselines import (
    DecodeFirst,
    PolicyError,
    PrefillFirst,
    Seq,
    make_baseline,
    parse_policy,
)
from ignition.simulate.devices import H200Roofline
from ignition.simulate.engine import run_baseline
from ignition.simulate.results import RequestRecord
from ignition.simulate.workloads import AcceptanceModel, SimRequest, poisson, with_acceptance


def seq(prompt: int, output: int, prefilled: int = 0, generated: int = 0) -> Seq:
    s = Seq(SimRequest(0.0, prompt, output), RequestRecord(0, 0.0, prompt, output))
    s.prefilled, s.generated = prefilled, generated
    return s


def test_vllm_style_serves_every_decoder_first_then_chunks_prompts_into_the_budget():
    decoders = [seq(10, 50, 10, 1) for _ in range(3)]
    partial = seq(5000, 10, 1000)
    waiting = [seq(3000, 10), seq(100, 10)]
    batch = DecodeFirst(budget=2048).schedule([*decoders, partial], waiting, free_slots=2)
    assert list(batch.decode) == decoders
    assert [(s, n) for s, n in batch.prefill] == [(partial, 2045)]
    assert batch.tokens == 2048


def test_fixed_k_drafts_cost_each_decoder_one_plus_k_tokens():
    decoders = [seq(10, 50, 10, 1) for _ in range(4)]
    batch = DecodeFirst(budget=512, drafts=3).schedule(decoders, [seq(1000, 5)], free_slots=1)
    assert batch.drafts == 3 and batch.tokens == 512
    assert batch.prefill[0][1] == 512 - 16


def test_new_requests_are_admitted_fcfs_only_into_free_slots():
    waiting = [seq(100, 5), seq(100, 5), seq(100, 5)]
    batch = DecodeFirst(budget=8192).schedule([], waiting, free_slots=2)
    assert [s for s, _ in batch.prefill] == waiting[:2]


def test_prefill_first_runs_prompt_only_batches_while_prompt_work_can_run():
    decoders = [seq(10, 50, 10, 1)]
    batch = PrefillFirst(budget=8192).schedule(decoders, [seq(300, 5)], free_slots=1)
    assert batch.decode == () and batch.prefill[0][1] == 300
    batch = PrefillFirst().schedule(decoders, [], free_slots=0)
    assert list(batch.decode) == decoders


@pytest.mark.parametrize(
    ("name", "budget", "drafts"),
    [
        ("vllm", 2048, 0),
        ("vllm-k3", 2048, 3),
        ("vllm-b8192", 8192, 0),
        ("sarathi", 512, 0),
        ("prefill-first", 8192, 0),
        ("vllm-b4096-k2", 4096, 2),
    ],
)
def test_policy_names_give_family_budget_and_drafts(name, budget, drafts):
    policy = make_baseline(name)
    assert (policy.budget, policy.drafts) == (budget, drafts)


def test_an_unknown_policy_name_is_one_line_naming_it():
    with pytest.raises(PolicyError, match="unknown policy 'orca'") as info:
        parse_policy("orca")
    assert "\n" not in str(info.value)


def test_the_engine_finishes_every_request_with_its_output_within_the_slots():
    reqs = with_acceptance(
        poisson(5.0, 40, prompt_tokens=(200, 900), output_tokens=(5, 40), seed=3),
        AcceptanceModel((0.9, 0.8, 0.7)),
    )
    for name in ("vllm", "vllm-k3", "sarathi", "prefill-first"):
        run = run_baseline(make_baseline(name), reqs, H200Roofline(), slots=4)
        assert run.finished == len(reqs)
        assert [sum(n for _, n in r.deliveries) for r in run.requests] == [
            r.output_tokens for r in reqs
        ]
        assert all(r.first_output_ms > r.arrival_ms for r in run.requests)
        assert max(e.rows for e in run.executions) <= 4


def test_helios_variants_are_named_and_unknown_ones_rejected():
    assert parse_policy("helios+normalizer-newcomer+trained").extras["variants"] == (
        "normalizer-newcomer",
        "trained",
    )
    with pytest.raises(PolicyError, match="unknown Helios variant 'turbo'"):
        parse_policy("helios+turbo")


def test_the_wide_mixed_what_if_adds_wider_mixed_widths_at_the_2048_bucket_only():
    from ignition.simulate.harness import helios_catalog

    stock = helios_catalog("qwen38", 32, 128)
    wide = helios_catalog("qwen38", 32, 128, wide_mixed=2048)
    seed = helios_catalog("qwen38", 32, 128, seed_wide=True)  # before the recipe's 1024 step

    def wider(catalog):
        return {
            d.prefill_capacity
            for d in catalog.descriptors
            if d.kind.value == "mixed" and d.token_capacity > 1
        }

    assert wider(seed) == {512} and wider(stock) == {512, 1024}
    assert wider(wide) == {512, 1024, 2048}
    assert {d.name for d in seed.descriptors} < {d.name for d in stock.descriptors}
    assert {d.name for d in stock.descriptors} < {d.name for d in wide.descriptors}


def test_the_first_delivery_variant_runs_helios_with_the_credit_on():
    """Issue 10b: ``helios+first-delivery`` is Helios with PolicyConfig.first_delivery = 1."""
    from ignition.simulate.harness import Setup, helios_simulation
    from ignition.simulate.workloads import SimRequest

    requests = [SimRequest(0.0, 100, 4)]
    plain = helios_simulation(requests, Setup(slots=4), "helios")
    sim = helios_simulation(requests, Setup(slots=4), "helios+first-delivery")
    assert plain.scheduler.policy.first_delivery == 0
    assert sim.scheduler.policy.first_delivery == 1.0
