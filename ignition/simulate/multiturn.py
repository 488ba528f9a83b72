"""Multi-turn chat with checkpoint retention on and off (``ignition simulate
--conversations``): the real engine loop, Helios and the checkpoint cache against a
device model, every run of a workload generating the same text (docs/simulate.md,
"multiturn.py"). TTFT counts from a turn's sending."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import replace

from ignition.components.catalog import Catalog
from ignition.components.state_programs import state_programs
from ignition.helios import PolicyConfig, Resources, Scheduler
from ignition.runtime.loop.engine import Engine
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from ignition.runtime.retention.checkpoints import CheckpointCache
from ignition.simulate.devices import DeviceModel
from ignition.simulate.multiturn_turns import NS_PER_MS, MultiTurnSpec, Turn, build_turns
from ignition.simulate.multiturn_worker import Clock, Ids, SimulatedWorker
from ignition.simulate.retention_results import RetentionRun
from ignition.simulate.workloads import WorkloadError


def run_retention(
    spec: MultiTurnSpec,
    snapshot_rows: int,
    catalog: Catalog,
    *,
    slots: int,
    device: DeviceModel,
    policy: PolicyConfig | None = None,
    max_context_tokens: int = 16384,
    preseed_costs: bool = True,
    initialize: bool = True,
    payoff: bool = True,
) -> RetentionRun:
    """One run of the workload with ``snapshot_rows`` retained-checkpoint rows (0: off).
    ``initialize``: fresh requests start through the init program, as in the runtime
    (False: their state is zeroed outside Helios, at no device time); ``payoff``: the
    checkpoint cache's pay-off rule (runtime/retention/payoff.py; False restores and
    captures whatever the allowance admits)."""
    conversations_ = build_turns(spec)
    turns = [t for c in conversations_ for t in c]
    longest = max(len(t.prompt) + len(t.reply) for t in turns)
    if longest + 1 > max_context_tokens:
        raise WorkloadError(
            f"conversations: a turn reaches {longest} tokens, over the context "
            f"{max_context_tokens}; fewer turns or shorter messages"
        )
    clock = Clock()
    catalog = replace(catalog, descriptors=(*catalog.descriptors, *state_programs(initialize)))
    scheduler = Scheduler(
        catalog, policy or PolicyConfig(), resources=Resources(num_request_slots=slots)
    )
    worker = SimulatedWorker(device, clock, {t.name: t.reply for t in turns}, max_context_tokens)
    if preseed_costs:
        programs = scheduler.programs()
        for d in (*programs.inference, *programs.state):
            scheduler.seed_cost(d, worker.nominal_ns(d))
    engine = Engine(
        scheduler,
        worker,
        Ids(),
        max_context_tokens=max_context_tokens,
        clock_ns=lambda: clock.now_ns,
        checkpoints=CheckpointCache(snapshot_rows, payoff=payoff),
        max_waiting=len(turns) + 1,
    )
    ready: list[tuple[int, int, int]] = []  # (send time, conversation, turn index)
    for c in conversations_:
        heapq.heappush(ready, (c[0].planned_ns, c[0].conversation, 0))

    def sink_for(turn: Turn) -> Callable:
        def sink(chunk) -> None:
            if chunk.token_ids and turn.first_token_ns < 0:
                turn.first_token_ns = clock.now_ns
            turn.output += chunk.token_ids
            turn.cached = chunk.num_cached_tokens
            if chunk.finish_reason:
                turn.finish_ns = clock.now_ns
                following = conversations_[turn.conversation][turn.index + 1 :]
                if following:
                    nxt = following[0]
                    heapq.heappush(
                        ready, (max(nxt.planned_ns, clock.now_ns), nxt.conversation, nxt.index)
                    )

        return sink

    idle_steps = 0
    while ready or engine.has_work:
        while ready and ready[0][0] <= clock.now_ns:
            _, c, k = heapq.heappop(ready)
            turn = conversations_[c][k]
            turn.sent_ns = clock.now_ns
            sampling = SamplingParams(max_tokens=len(turn.reply), temperature=0.0, ignore_eos=True)
            engine.submit(
                GenerationRequest(turn.name, turn.prompt, sampling, turn.ends), sink_for(turn)
            )
        progressed = engine.step()
        if not engine.has_work and ready:
            clock.now_ns = max(clock.now_ns, ready[0][0])
        idle_steps = 0 if progressed else idle_steps + 1
        if idle_steps > 1000:
            raise RuntimeError("the simulated engine stopped making progress")
    for t in turns:
        if t.output != t.reply:
            raise RuntimeError(f"{t.name}: the engine did not deliver its planned reply")
    later = [t for t in turns if t.index > 0]
    stats = engine.stats.snapshot()
    return RetentionRun(
        snapshot_rows=snapshot_rows,
        turns=len(turns),
        first_turn_ttft_ms=tuple(
            (t.first_token_ns - t.sent_ns) / NS_PER_MS for t in turns if t.index == 0
        ),
        later_turn_ttft_ms=tuple((t.first_token_ns - t.sent_ns) / NS_PER_MS for t in later),
        later_prompt_tokens=sum(len(t.prompt) for t in later),
        later_history_tokens=sum(t.history for t in later),
        later_cached_tokens=sum(t.cached for t in later),
        prefill_tokens=worker.prefill_tokens,
        restores=stats.executions_by_kind.get("restore", 0),
        evictions=stats.prefix_cache_evictions,
        makespan_ms=clock.now_ns / NS_PER_MS,
        tpot_ms=tuple(
            (t.finish_ns - t.first_token_ns) / NS_PER_MS / (len(t.output) - 1)
            for t in turns
            if len(t.output) > 1
        ),
        outputs={t.name: t.output for t in turns},
    )
