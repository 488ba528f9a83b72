"""The ``prompt-pairs`` what-if admission (simulate/sim.py) and the host's prompt-row
gathers each request records (``RequestRecord.prompt_rows_ms``), on the calibrated 4x
H100 profile whose host gathers a prompt's rows before its first chunk, one prompt after
another."""

from __future__ import annotations

from ignition.simulate.baselines import make_baseline
from ignition.simulate.engine import run_baseline
from ignition.simulate.harness import run_policy
from scripts.scheduling_sim.realworld import random_setup, random_workload

PROMPT = 1024  # the random workload's prompt length


def _run(policy: str, c: int = 8):
    """The study's random run at concurrency ``c``, its first 96 requests (as the digest)."""
    return run_policy(policy, random_workload(c)[:96], random_setup(c))


def _frames_with_two_prompts(run) -> int:
    return sum(1 for e in run.executions if e.prompt_tokens >= 2 * PROMPT)


def test_every_request_records_its_gather_one_after_another():
    for run in (_run("helios"), _run("vllm-padded")):
        gathers = sorted(r.prompt_rows_ms for r in run.requests)
        assert len(gathers) == len(run.requests)
        for (start, end), (next_start, _) in zip(gathers, gathers[1:]):
            assert end > start and next_start >= end - 1e-6  # one FIFO on the host
        for r in run.requests:
            assert r.prompt_start_ms >= r.prompt_rows_ms[1] - 1e-6  # rows before the chunk


def test_the_baseline_engine_records_the_same_gathers():
    setup = random_setup(8)
    run = run_baseline(make_baseline("vllm-padded"), random_workload(8), setup.device, slots=8)
    assert all(r.prompt_rows_ms is not None for r in run.requests)


def test_prompt_pairs_hold_the_first_prompt_for_the_second_and_share_a_frame():
    plain, paired = _run("helios", 64), _run("helios+prompt-pairs", 64)
    assert _frames_with_two_prompts(plain) == 0  # rows arrive 164 ms apart, frames <= 50 ms
    assert _frames_with_two_prompts(paired) >= 40  # of 96 prompts
    held = [r for r in paired.requests if r.prompt_start_ms - r.prompt_rows_ms[1] > 100.0]
    assert held  # a head waited for its partner's rows beyond its own
    waits = [r.prompt_start_ms - r.prompt_rows_ms[1] for r in plain.requests]
    assert max(waits) < 100.0
