"""Simulated multi-turn chat: second and later turns with checkpoint retention on and off.

Runs the real engine loop, Helios and the checkpoint cache against a simulated device
(a virtual clock and a stated timing formula, no model), so the numbers compare
scheduling and prefill work only; they are not device measurements.

    .venv/bin/python benchmarks/prefix_cache_sim.py [--conversations 8 --turns 4]

Timing formula (ms): prefill or mixed graph 0.5 + 0.01 * prompt capacity
+ 0.02 * batch rows; decode 0.3 + 0.02 * batch rows; snapshot and restore 0.2.
"""

from __future__ import annotations

import argparse
import heapq
import statistics
from dataclasses import dataclass, replace

from ignition.components.capacity import plan_catalog
from ignition.components.catalog import Descriptor, GraphKind
from ignition.helios import CompletionRecord, ExecutionTiming, LaneRole, Resources, Scheduler
from ignition.recipes import LoadOptions, get_recipe
from ignition.runtime.checkpoints import CheckpointCache
from ignition.runtime.engine import Engine, FrameResult
from ignition.runtime.requests import GenerationRequest, SamplingParams

SNAPSHOT = Descriptor(GraphKind.SNAPSHOT, 1, 0, 1, 1)
RESTORE = Descriptor(GraphKind.RESTORE, 1, 0, 1, 1)
MS = 1_000_000


def duration_ns(d: Descriptor) -> int:
    if d.kind in (GraphKind.SNAPSHOT, GraphKind.RESTORE):
        ms = 0.2
    elif d.kind is GraphKind.PREFILL:
        ms = 0.5 + 0.01 * d.token_capacity + 0.02 * d.batch_capacity
    elif d.kind is GraphKind.MIXED:
        ms = 0.5 + 0.01 * d.prefill_capacity + 0.02 * d.batch_capacity
    else:
        ms = 0.3 + 0.02 * d.batch_capacity
    return round(ms * MS)


class Clock:
    def __init__(self) -> None:
        self.now_ns = 0
        self.busy_until_ns = 0


class SimulatedWorker:
    """Every frame takes its formula duration on one device queue; tokens are a
    deterministic function of the slot's history, so outputs repeat across runs."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.prefill_tokens = 0

    def launch(self, plan, fence, live):
        records = []
        for lane in plan.lanes:
            request = live[lane.handle]
            if lane.role is LaneRole.PROMPT:
                self.prefill_tokens += lane.num_prompt_tokens
                ids = (7,) if lane.max_advance_tokens else ()
                records.append(CompletionRecord(lane.handle, lane.num_prompt_tokens, ids))
            elif lane.role is LaneRole.DECODE:
                token = (len(request.output_ids) * 31 + len(request.prompt_ids)) % 50 + 1000
                records.append(CompletionRecord(lane.handle, 0, (token,)))
            else:
                records.append(CompletionRecord(lane.handle))
        start = max(self.clock.now_ns, self.clock.busy_until_ns)
        self.clock.busy_until_ns = start + duration_ns(plan.descriptor)
        timing = ExecutionTiming(duration_ns(plan.descriptor), duration_ns(plan.descriptor))
        return self.clock.busy_until_ns, FrameResult(tuple(records), timing)

    def wait(self, pending):
        end, result = pending
        self.clock.now_ns = max(self.clock.now_ns, end)
        return result

    def release(self, handle) -> None:
        pass


class Ids:
    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "".join(chr(0x4E00 + i % 2000) for i in ids)


@dataclass
class Turn:
    conversation: int
    index: int
    arrival_ns: int
    prompt: tuple[int, ...]
    ends: tuple[int, ...]
    first_token_ns: int = -1
    output: tuple[int, ...] = ()
    cached: int = 0


def run(args, snapshot_rows: int) -> dict:
    catalog = plan_catalog(get_recipe("qwen38"), LoadOptions(mixed_prefill=True, speculation="off"))
    catalog = replace(catalog, descriptors=(*catalog.descriptors, SNAPSHOT, RESTORE))
    clock = Clock()
    scheduler = Scheduler(catalog, resources=Resources(num_request_slots=4))
    worker = SimulatedWorker(clock)
    engine = Engine(
        scheduler,
        worker,
        Ids(),
        max_context_tokens=16384,
        clock_ns=lambda: clock.now_ns,
        checkpoints=CheckpointCache(snapshot_rows),
        max_waiting=1024,
    )
    system = tuple(range(3000, 3000 + args.system_tokens))
    arrivals: list[tuple[int, int, Turn]] = []
    done: list[Turn] = []
    for c in range(args.conversations):
        user = tuple(100 + (c * 13 + i) % 800 for i in range(args.user_tokens))
        prompt = (*system, *user, 1, 2)
        ends = (len(system), len(system) + len(user))
        turn = Turn(c, 0, c * args.stagger_ms * MS, prompt, ends)
        heapq.heappush(arrivals, (turn.arrival_ns, c, turn))

    def sink_for(turn: Turn):
        def sink(chunk) -> None:
            if chunk.token_ids and turn.first_token_ns < 0:
                turn.first_token_ns = clock.now_ns
            turn.output += chunk.token_ids
            turn.cached = chunk.num_cached_tokens
            if chunk.finish_reason:
                done.append(turn)
                if turn.index + 1 < args.turns:
                    user = tuple(
                        900 + (turn.conversation * 7 + turn.index * 11 + i) % 900
                        for i in range(args.user_tokens)
                    )
                    history = (*turn.prompt, *turn.output, 3)
                    prompt = (*history, *user, 1, 2)
                    ends = (*turn.ends, len(history), len(history) + len(user))
                    later = clock.now_ns + args.think_ms * MS
                    nxt = Turn(turn.conversation, turn.index + 1, later, prompt, ends)
                    heapq.heappush(arrivals, (later, turn.conversation, nxt))

        return sink

    while arrivals or engine.has_work:
        while arrivals and arrivals[0][0] <= clock.now_ns:
            _, _, turn = heapq.heappop(arrivals)
            sampling = SamplingParams(
                max_tokens=args.output_tokens, temperature=0.0, ignore_eos=True
            )
            request = GenerationRequest(
                f"c{turn.conversation}t{turn.index}", turn.prompt, sampling, turn.ends
            )
            engine.submit(request, sink_for(turn))
        if not engine.step() and not engine.has_work and arrivals:
            clock.now_ns = max(clock.now_ns, arrivals[0][0])
    later_turns = [t for t in done if t.index > 0]
    ttft = [(t.first_token_ns - t.arrival_ns) / MS for t in later_turns]
    shared = [len(t.prompt) for t in later_turns]
    return {
        "snapshot_rows": snapshot_rows,
        "turns": len(done),
        "later_turn_ttft_mean_ms": statistics.mean(ttft),
        "later_turn_ttft_p90_ms": statistics.quantiles(ttft, n=10)[-1],
        "prefill_tokens": worker.prefill_tokens,
        "cached_fraction_later_turns": sum(t.cached for t in later_turns) / sum(shared),
        "makespan_ms": clock.now_ns / MS,
        "evictions": engine.stats.snapshot().prefix_cache_evictions,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=8)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--system-tokens", type=int, default=600)
    parser.add_argument("--user-tokens", type=int, default=150)
    parser.add_argument("--output-tokens", type=int, default=32)
    parser.add_argument("--think-ms", type=int, default=50)
    parser.add_argument("--stagger-ms", type=int, default=7)
    parser.add_argument("--snapshot-rows", type=int, default=16)
    args = parser.parse_args()
    for rows in (0, args.snapshot_rows):
        result = run(args, rows)
        print(
            "  ".join(
                f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in result.items()
            )
        )


if __name__ == "__main__":
    main()
