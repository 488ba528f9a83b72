"""Does a connected /dashboard slow the engine? Wall time per ``Engine.step`` (a benchmark).

The engine runs the costless worker of engine_step.py (so the step is host work only and
any overhead shows in full: an upper bound for a real model's step) in three setups,
interleaved run by run:

- ``off``: no trace recorder (``--disable-dashboard`` without ``--trace-file``);
- ``hook``: the recorder hooked in (the default server), nothing reading it;
- ``page``: the recorder plus a thread doing what GET /dashboard/state does for a
  connected page (``summary(120)`` and its JSON) every ``--poll-ms`` (the page: 500).

Prints the median microseconds per step of each and the ratios to ``off``.

    .venv/bin/python benchmarks/dashboard_step.py [--runs 15] [--poll-ms 500]
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

from engine_step import InstantWorker, Letters

from ignition.components.capacity import plan_catalog
from ignition.helios import Resources, Scheduler
from ignition.recipes import LoadOptions, get_recipe
from ignition.runtime.loop.engine import Engine
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from ignition.runtime.tracing.hook import install_trace_hook
from ignition.runtime.tracing.recorder import TraceRecorder


def run_once(setup: str, poll_s: float, num_requests: int = 16, max_tokens: int = 128) -> float:
    catalog = plan_catalog(get_recipe("qwen38"), LoadOptions(mixed_prefill=True, speculation="off"))
    scheduler = Scheduler(catalog, resources=Resources(num_request_slots=num_requests))
    engine = Engine(scheduler, InstantWorker(), Letters(), max_context_tokens=4096, max_waiting=64)
    recorder = TraceRecorder()
    if setup != "off":
        install_trace_hook(engine, recorder)
    stop = threading.Event()

    def page() -> None:
        while not stop.wait(poll_s):
            json.dumps(recorder.summary(120))

    reader = threading.Thread(target=page, daemon=True)
    if setup == "page":
        reader.start()
    for i in range(num_requests):
        sampling = SamplingParams(max_tokens=max_tokens, temperature=0)
        engine.submit(GenerationRequest(f"r{i}", tuple(range(1, 40 + i)), sampling), lambda chunk: None)
    steps, began = 0, time.perf_counter_ns()
    while engine.has_work:
        engine.step()
        steps += 1
    elapsed = time.perf_counter_ns() - began
    stop.set()
    if setup == "page":
        reader.join()
    return elapsed / 1e3 / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--poll-ms", type=float, default=500.0)
    args = parser.parse_args()
    setups = ("off", "hook", "page")
    for setup in setups:
        run_once(setup, args.poll_ms / 1e3)  # warm up
    samples: dict[str, list[float]] = {s: [] for s in setups}
    for _ in range(args.runs):
        for setup in setups:
            samples[setup].append(run_once(setup, args.poll_ms / 1e3))
    medians = {s: statistics.median(v) for s, v in samples.items()}
    spread = {s: (min(v), max(v)) for s, v in samples.items()}
    for s in setups:
        low, high = spread[s]
        print(f"{s:5s} median {medians[s]:8.1f} us/step (runs {low:.1f}..{high:.1f})")
    print(
        f"ratio hook/off {medians['hook'] / medians['off']:.3f}, "
        f"page/off {medians['page'] / medians['off']:.3f}, "
        f"page/hook {medians['page'] / medians['hook']:.3f} (poll every {args.poll_ms:g} ms)"
    )


if __name__ == "__main__":
    main()
