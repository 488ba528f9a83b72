"""The baselines users run today behind one interface (issue 29 item 3)."""

from __future__ import annotations

import pytest

from ignition.simulate.acceptance import Round
from ignition.simulate.adaptive import SURVIVAL_THRESHOLD, DynamicK, SGLangTiers
from ignition.simulate.baselines import describe, make_baseline, parse_policy
from ignition.simulate.devices import PROFILES
from ignition.simulate.engine import run_baseline
from ignition.simulate.results import RequestRecord
from ignition.simulate.steps import Batch, Seq
from ignition.simulate.workloads import SimRequest


def decoder(signal: tuple[float, ...]) -> Seq:
    s = Seq(SimRequest(0.0, 10, 100, signal), RequestRecord(0, 0.0, 10, 100))
    s.prefilled, s.generated = 10, 1
    s.round = Round(signal, signal)
    return s


def test_adaptive_verification_widths_follow_each_requests_survival_prefix():
    sure, unsure = decoder((0.95, 0.9, 0.9, 0.9, 0.9)), decoder((0.3, 0.9, 0.9))
    batch = make_baseline("vllm-adaptive").schedule([sure, unsure], [], 0)
    assert batch.widths == (6, 1)
    assert batch.drafts == 5 and batch.tokens == 7
    assert SURVIVAL_THRESHOLD > 0.3


def test_dynamic_speculation_takes_k_from_the_batch_size_table():
    policy = DynamicK()
    assert [policy.k_for(n) for n in (1, 8, 9, 16, 32, 33)] == [3, 3, 2, 2, 1, 0]


def test_sglang_tiers_climb_on_long_accepts_and_fall_on_short_ones():
    policy = SGLangTiers()
    batch = Batch((), (decoder((0.9,)),), 3)
    for _ in range(20):
        policy.observe(batch, [3])
    assert policy.k == 7
    batch = Batch((), (decoder((0.9,)),), 7)
    for _ in range(40):
        policy.observe(batch, [0])
    assert policy.k == 1


@pytest.mark.parametrize("name", ["vllm-dyn", "vllm-adaptive", "sglang-tiers", "sarathi"])
def test_every_baseline_runs_on_the_one_engine_and_finishes_every_request(name):
    requests = [
        SimRequest(i * 5.0, 300, 40, (0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2)) for i in range(12)
    ]
    run = run_baseline(
        make_baseline(name),
        requests,
        PROFILES["qwen38-flash-next-h200"],
        slots=8,
        confidence_noise=0.7,
    )
    assert all(r.finish_ms is not None for r in run.requests)


def test_adaptive_families_describe_their_draft_ceiling():
    assert parse_policy("vllm-adaptive").drafts == 5
    assert "at most K = 7" in describe("sglang-tiers")
