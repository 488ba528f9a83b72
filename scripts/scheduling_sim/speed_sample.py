"""Time single points of the real-world study (``realworld.py``), not the study itself.

    python -m scripts.scheduling_sim.speed_sample                  # every point below
    python -m scripts.scheduling_sim.speed_sample --only small --cprofile 25

Each point is one run the study makes, at its full-study size: a conversation-trace run
of the capacity search (600 trace rows at load 0.25, a mid-grid rate, with the search's
TTFT guard), the random benchmark at concurrency 64, and the long-prompt pair. ``small``
is a short Helios run (100 rows at 0.35) for profiling. Prints process CPU and wall
seconds per point: run it on two trees to compare them, and multiply by the study's
run counts for an estimate of the whole study (docs/capacity.md, "Simulator speed").
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from collections.abc import Callable

from ignition.simulate.harness import run_policy
from ignition.simulate.metrics import measure
from scripts.scheduling_sim.realworld import (
    TARGET_SLO,
    Plan,
    conv_workload,
    long_prompt_workload,
    random_workload,
    setup_for,
)

H200 = "qwen38-flash-next-h200"


def _conv(name: str, rows: tuple[int, int], rate: float) -> Callable[[], str]:
    def run() -> str:
        requests = conv_workload(Plan(False, rows))(rate)
        result = run_policy(name, requests, setup_for(H200, 32, 128), TARGET_SLO.ttft_p99_ms)
        m = measure(result)
        return f"p99 TBT {m.tbt_ms.p99:.2f} ms, finished {m.finished}/{m.requests}"

    return run


def _random(concurrency: int) -> str:
    setup = setup_for("qwen38-flash-next-4xh100", concurrency, 128)
    got = measure(run_policy("helios", random_workload(concurrency), setup))
    return f"{got.output_tokens_per_s:.1f} tok/s"


def _long() -> str:
    plan, setup = Plan(False), setup_for(H200, 32, 128)
    full = measure(run_policy("helios", long_prompt_workload(plan, 0.5), setup))
    half = measure(run_policy("helios", long_prompt_workload(plan, 0.25), setup))
    return f"p99 TBT {full.tbt_ms.p99:.2f} ms, half-load p50 TTFT {half.ttft_ms.p50:.1f} ms"


POINTS: dict[str, Callable[[], str]] = {
    "small": _conv("helios", (2000, 2100), 0.35),
    "conv-helios": _conv("helios", (2000, 2600), 0.25),
    "conv-vllm-padded": _conv("vllm-padded", (2000, 2600), 0.25),
    "conv-vllm-adaptive-padded": _conv("vllm-adaptive-padded", (2000, 2600), 0.25),
    "random-c64-helios": lambda: _random(64),
    "long-helios": _long,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help=f"comma-separated: {', '.join(POINTS)}")
    parser.add_argument("--cprofile", type=int, default=0, help="print this many top functions")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(POINTS)
    for name in names:
        if name not in POINTS:
            parser.error(f"--only: unknown point {name!r} (known: {', '.join(POINTS)})")
    _conv("helios", (2000, 2002), 0.35)()  # builds and caches the recipe's catalog
    for name in names:
        profile = cProfile.Profile() if args.cprofile else None
        cpu, wall = time.process_time(), time.perf_counter()
        if profile is not None:
            profile.enable()
        summary = POINTS[name]()
        if profile is not None:
            profile.disable()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        print(f"{name:<26} cpu {cpu:7.2f} s  wall {wall:7.2f} s  {summary}", flush=True)
        if profile is not None:
            pstats.Stats(profile).sort_stats("cumulative").print_stats(args.cprofile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
