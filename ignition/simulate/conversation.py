"""Baselines on a multi-turn chat workload: ``multiturn_turns.build_turns``'s
conversations re-sent and re-prefilled whole each turn, under the same closed loop; the
result has ``RetentionRun``'s shape (docs/simulate.md, "conversation.py")."""

from __future__ import annotations

from collections.abc import Sequence

from ignition.simulate.engine import run_baseline
from ignition.simulate.multiturn_turns import NS_PER_MS, MultiTurnSpec, Turn, build_turns
from ignition.simulate.results import RunResult
from ignition.simulate.retention_results import RetentionRun
from ignition.simulate.steps import BaselinePolicy
from ignition.simulate.workloads import SimRequest


def conversation_requests(
    spec: MultiTurnSpec,
) -> tuple[list[Turn], list[SimRequest], list[int | None]]:
    """Every turn, its request (the whole prompt re-sent, no acceptance: Helios's
    conversation catalog does not speculate either) and the turn it waits for."""
    turns = [t for c in build_turns(spec) for t in c]
    index = {(t.conversation, t.index): i for i, t in enumerate(turns)}
    requests = [
        SimRequest(
            t.planned_ns / NS_PER_MS,
            len(t.prompt),
            len(t.reply),
            message_endpoints=t.ends,
            conversation=t.conversation,
            turn=t.index,
            cached_prefix=t.history,
        )
        for t in turns
    ]
    after = [index.get((t.conversation, t.index - 1)) for t in turns]
    return turns, requests, after


def run_conversation_baseline(
    policy: BaselinePolicy,
    spec: MultiTurnSpec,
    device,
    *,
    slots: int,
    seed: int = 0,
    noise_sigma: float = 0.0,
) -> tuple[RetentionRun, RunResult]:
    """One baseline over the conversations; its summary and the run it comes from."""
    turns, requests, after = conversation_requests(spec)
    run = run_baseline(
        policy, requests, device, slots=slots, seed=seed, noise_sigma=noise_sigma, after=after
    )
    return summary(policy.name, turns, requests, run), run


def summary(
    name: str, turns: Sequence[Turn], requests: Sequence[SimRequest], run: RunResult
) -> RetentionRun:
    def ttft(i: int) -> float:
        r = run.requests[i]
        return r.first_output_ms - r.arrival_ms

    later = [i for i, t in enumerate(turns) if t.index > 0]
    return RetentionRun(
        snapshot_rows=0,
        turns=len(turns),
        first_turn_ttft_ms=tuple(ttft(i) for i, t in enumerate(turns) if t.index == 0),
        later_turn_ttft_ms=tuple(ttft(i) for i in later),
        later_prompt_tokens=sum(requests[i].prompt_tokens for i in later),
        later_history_tokens=sum(requests[i].cached_prefix for i in later),
        later_cached_tokens=0,
        prefill_tokens=sum(r.prompt_tokens for r in requests),
        restores=0,
        evictions=0,
        makespan_ms=run.end_ms,
        tpot_ms=tuple(
            (r.finish_ms - r.first_output_ms) / (r.output_tokens - 1)
            for r in run.requests
            if r.output_tokens > 1
        ),
        policy=name,
    )
