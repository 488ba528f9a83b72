"""Host cost of one ``Engine.step`` with a worker that costs nothing (a benchmark).

The worker answers every frame at once with scripted tokens, so the time is the engine
loop's own: draining the inbox, admission, Helios planning and commit, the loop hooks,
completion, publication (detokenization, stop checks) and reaping. Prints the median and
the fastest run's microseconds per step (process CPU time, which other processes on a
shared machine disturb less than wall time) over runs of 8 concurrent requests of 64
output tokens each.

    .venv/bin/python benchmarks/engine_step.py [--runs 20]

Run it under an older ignition (``PYTHONPATH=<old checkout>``) for the before numbers.
"""

from __future__ import annotations

import argparse
import statistics
import time

from ignition.components.capacity import plan_catalog
from ignition.helios import CompletionRecord, ExecutionTiming, LaneRole, Resources, Scheduler
from ignition.recipes import LoadOptions, get_recipe
from ignition.runtime.executors.frames import FrameResult
from ignition.runtime.loop.engine import Engine
from ignition.runtime.requests.request import GenerationRequest, SamplingParams


class Letters:
    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "".join(chr(97 + i % 26) for i in ids)


class InstantWorker:
    """Emits token ``(last * 7 + 3) % 26 + 26`` per row (never an EOS): no device time."""

    def __init__(self) -> None:
        self.last: dict = {}

    def launch(self, plan, fence, live):
        records = []
        for lane in plan.lanes:
            if lane.role is LaneRole.PROMPT:
                token = 30 if lane.max_advance_tokens else None
                ids = (token,) if token is not None else ()
                if ids:
                    self.last[lane.handle] = token
                records.append(CompletionRecord(lane.handle, lane.num_prompt_tokens, ids))
                continue
            ids, last = [], self.last.get(lane.handle, 30)
            for _ in range(min(lane.query_length, lane.max_advance_tokens)):
                last = (last * 7 + 3) % 26 + 26
                ids.append(last)
            self.last[lane.handle] = last
            records.append(CompletionRecord(lane.handle, 0, tuple(ids)))
        return FrameResult(tuple(records), ExecutionTiming(device_ns=1_000_000, wall_ns=1_000_000))

    def wait(self, pending):
        return pending

    def release(self, handle) -> None:
        self.last.pop(handle, None)

    def carry_history(self, old, new) -> None:
        pass


def run_once(num_requests: int, max_tokens: int) -> tuple[float, int]:
    catalog = plan_catalog(get_recipe("qwen38"), LoadOptions(mixed_prefill=True, speculation="off"))
    scheduler = Scheduler(catalog, resources=Resources(num_request_slots=num_requests))
    engine = Engine(scheduler, InstantWorker(), Letters(), max_context_tokens=4096, max_waiting=64)
    for i in range(num_requests):
        prompt = tuple(range(1, 40 + i))
        sampling = SamplingParams(max_tokens=max_tokens, temperature=0)
        engine.submit(GenerationRequest(f"r{i}", prompt, sampling), lambda chunk: None)
    steps, began = 0, time.process_time_ns()
    while engine.has_work:
        engine.step()
        steps += 1
    return (time.process_time_ns() - began) / 1e3 / steps, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    run_once(8, 64)  # warm up (imports, first plans)
    samples, steps = [], 0
    for _ in range(args.runs):
        per_step, steps = run_once(8, 64)
        samples.append(per_step)
    print(
        f"engine step host CPU us ({args.runs} runs of {steps} steps): "
        f"median {statistics.median(samples):.1f}, fastest {min(samples):.1f}"
    )


if __name__ == "__main__":
    main()
