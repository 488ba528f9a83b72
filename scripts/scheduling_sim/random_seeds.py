"""Random tokens on 4x H100 over several seeds of the workload and the simulator, and how
long a prompt waits from ready to its first chunk (issue 39; numbers are simulated).

    python -m scripts.scheduling_sim.random_seeds POLICIES [--seeds 0-7] [-c 64] [--jobs 2]

The study (``realworld.study_random``) reports the mean over ``Plan.random_seeds``; this
runs any policies over any seeds (``--seeds`` takes a list and ranges: 0,3,8-15).
Per policy: output tok/s per seed (up to eight of them) and their mean with its standard
error, then, for Helios policies, the mean ready -> first prompt chunk wait and the
device idle between frames (both at the first seed).
"""

from __future__ import annotations

import argparse
import statistics

from ignition.simulate.harness import helios_simulation
from scripts.scheduling_sim.realworld import (
    SeedMean,
    _random_run,
    pool_map,
    random_setup,
    random_workload,
)


def waits(policy: str, c: int, seed: int) -> tuple[float, float]:
    """A Helios run's mean ready -> first prompt chunk (ms) and device idle (ms)."""
    sim = helios_simulation(random_workload(c, seed=seed), random_setup(c, seed), policy)
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


def seed_list(text: str) -> list[int]:
    """``0,3,8-15`` -> [0, 3, 8, 9, ..., 15]."""
    out: list[int] = []
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        try:
            out += range(int(first), int(last or first) + 1)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--seeds {text!r}: expected 0,3,8-15") from None
    if not out:
        raise argparse.ArgumentTypeError(f"--seeds {text!r}: no seed")
    return out


def tokens_per_s(policy: str, c: int, seed: int) -> float:
    """The study's run (``realworld._random_run``) at ``seed``."""
    return _random_run(c, policy, seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("policies")
    parser.add_argument("--seeds", type=seed_list, default=[0, 1, 2, 3])
    parser.add_argument("-c", "--concurrency", type=int, default=64)
    parser.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
    args = parser.parse_args()
    c, seeds = args.concurrency, args.seeds
    for policy in args.policies.split(","):
        row = pool_map(tokens_per_s, [(policy, c, s) for s in seeds], args.jobs)
        shown = row if len(row) <= 8 else []
        line = f"{policy:26s} " + " ".join(f"{x:8.1f}" for x in shown)
        got = SeedMean.of(row)
        line += f"  mean {got.mean:7.1f}"
        if got.count > 1:
            line += f" +- {got.se:4.1f} ({got.count} seeds)"
        if policy.split("+")[0] == "helios":
            ready, idle = waits(policy, c, seeds[0])
            line += f"  ready->chunk {ready:5.1f} ms  device idle {idle:6.1f} ms"
        print(line, flush=True)


if __name__ == "__main__":
    main()
