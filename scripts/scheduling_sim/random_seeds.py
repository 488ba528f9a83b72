"""Random tokens on 4x H100 over several seeds of the workload and the simulator, and how
long a prompt waits from ready to its first chunk (issue 39; numbers are simulated).

    python -m scripts.scheduling_sim.random_seeds POLICIES [--seeds 0,1,2,3] [-c 64]

The study (``realworld._random_run``) runs seed 0 only; at c = 64 policies a few tok/s
apart need the spread of several seeds. Per policy: output tok/s per seed and their
mean, then, for Helios policies, the mean ready -> first prompt chunk wait and the
device idle between frames (both at the first seed).
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import replace

from ignition.simulate.harness import helios_simulation, run_policy
from ignition.simulate.metrics import measure
from scripts.scheduling_sim.realworld import random_workload, setup_for

PROFILE = "qwen38-flash-next-4xh100"


def _setup(c: int, seed: int):
    return replace(setup_for(PROFILE, c, 32 if c <= 8 else 128), seed=seed)  # as the study


def waits(policy: str, c: int, seed: int) -> tuple[float, float]:
    """A Helios run's mean ready -> first prompt chunk (ms) and device idle (ms)."""
    sim = helios_simulation(random_workload(c, seed=seed), _setup(c, seed), policy)
    spans: list[tuple[int, int]] = []
    complete = sim._complete

    def watch(run, now):
        spans.append((run.start_ns, run.end_ns))
        complete(run, now)

    sim._complete = watch
    sim._loop()
    ready = [
        s.record.prompt_start_ms - (s.ready_ns if s.ready_ns is not None else s.arrival_ns) / 1e6
        for s in sim.streams
        if s.record.prompt_start_ms is not None
    ]
    idle = sum(max(0, b[0] - a[1]) for a, b in zip(spans, spans[1:])) / 1e6
    return statistics.mean(ready), idle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("policies")
    parser.add_argument("--seeds", default="0,1,2,3")
    parser.add_argument("-c", "--concurrency", type=int, default=64)
    args = parser.parse_args()
    c, seeds = args.concurrency, [int(s) for s in args.seeds.split(",")]
    for policy in args.policies.split(","):
        row = [
            measure(run_policy(policy, random_workload(c, seed=s), _setup(c, s)))
            .output_tokens_per_s
            for s in seeds
        ]
        line = f"{policy:26s} " + " ".join(f"{x:8.1f}" for x in row)
        line += f"  mean {statistics.mean(row):7.1f}"
        if policy.split("+")[0] == "helios":
            ready, idle = waits(policy, c, seeds[0])
            line += f"  ready->chunk {ready:5.1f} ms  device idle {idle:6.1f} ms"
        print(line, flush=True)


if __name__ == "__main__":
    main()
