"""Issue 40's before/after rows: Helios variants on the real-world study's quick plan.

    python -m scripts.scheduling_sim.objective_rules --long POLICIES
    python -m scripts.scheduling_sim.objective_rules --conv PROFILE POLICIES [--jobs 2 --seeds 0-2]
    python -m scripts.scheduling_sim.objective_rules --random POLICIES
    python -m scripts.scheduling_sim.objective_rules --conv PROFILE POLICIES --at 0.5

``--long``: the long-prompt workload (30 decoders, 20 prompts of 2,000-8,000 tokens,
H200): p99 TBT, output tok/s and p99 TTFT at 0.5/s, p50 TTFT at 0.25/s. ``--conv``: the
conversation trace's quick capacity search at p99 TBT 100 ms / TTFT 5 s (grid factor
2^(1/2), one bisection; ``--seeds`` repeats it at other seeds of the tasks' acceptance
and the simulator's noise). ``--random``: vLLM's recipe benchmark at c = 8 and 64 (4x
H100). ``--at LOAD`` runs ``--conv``'s trace once at that load instead of searching
(with the search's 5 s TTFT guard): p99 TTFT and p99 TBT. The same plans and seeds as ``realworld --quick``, for named variants
(``helios+balanced``: the seed's preset; ``helios``: the default, objective).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ignition.simulate.baselines import PolicyError, parse_policy
from ignition.simulate.harness import run_policy
from ignition.simulate.metrics import measure
from scripts.scheduling_sim.random_seeds import seed_list
from scripts.scheduling_sim.realworld import (
    Plan,
    _conv_capacity,
    _random_run,
    conv_workload,
    long_prompt_workload,
    pool_map,
    setup_for,
)

QUICK = Plan(True, (2000, 2200), long_prompts=20, decoder_output=2000)


def long_row(name: str) -> str:
    setup = setup_for("qwen38-flash-next-h200", 32, 128)
    a = measure(run_policy(name, long_prompt_workload(QUICK, 0.5), setup))
    b = measure(run_policy(name, long_prompt_workload(QUICK, 0.25), setup))
    return (
        f"| `{name}` | {a.tbt_ms.p99:.0f} ms | {a.output_tokens_per_s:.0f} | "
        f"{b.ttft_ms.p50 / 1e3:.2f} s | {a.ttft_ms.p99 / 1e3:.2f} s |"
    )


def at_row(profile: str, load: float, name: str) -> str:
    requests = conv_workload(QUICK)(load)
    m = measure(run_policy(name, requests, setup_for(profile, 32, 128), ttft_guard_ms=5000.0))
    ttft = "stopped (> 1% past 5 s)" if m.aborted else f"{m.ttft_ms.p99 / 1e3:.2f} s"
    return f"| {profile} | `{name}` | {load:g} | {ttft} | {m.tbt_ms.p99:.0f} ms |"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--long", metavar="POLICIES")
    group.add_argument("--conv", nargs=2, metavar=("PROFILE", "POLICIES"))
    group.add_argument("--random", metavar="POLICIES")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--at", type=float, default=0.0, help="--conv: one run at this load")
    parser.add_argument(
        "--seeds", default="0", help="--conv capacity: seeds of tasks and noise (0,1,2; 0-3)"
    )
    args = parser.parse_args(argv)
    text = args.long or args.random or args.conv[1]
    names = [p.strip() for p in text.split(",") if p.strip()]
    try:
        for n in names:
            parse_policy(n)
        if args.long:
            print("| policy | p99 TBT at 0.5/s | tok/s | p50 TTFT at 0.25/s | p99 TTFT at 0.5/s |")
            print("|---|---|---|---|---|")
            for row in pool_map(long_row, [(n,) for n in names], args.jobs):
                print(row)
        elif args.random:
            calls = [(c, n) for n in names for c in (8, 64)]
            for (c, n), got in zip(calls, pool_map(_random_run, calls, args.jobs)):
                print(f"| `{n}` | c = {c} | {got:,.0f} tok/s |")
        elif args.at > 0:
            for row in pool_map(at_row, [(args.conv[0], args.at, n) for n in names], args.jobs):
                print(row)
        else:
            profile = args.conv[0]
            setup_for(profile, 32, 128)
            seeds = seed_list(args.seeds)
            calls = [(QUICK, profile, n, s) for n in names for s in seeds]
            for (_, _, n, s), cap in zip(calls, pool_map(_conv_capacity, calls, args.jobs)):
                seed = f" (seed {s})" if seeds != [0] else ""
                print(f"| {profile} | `{n}`{seed} | {cap:.3f} |")
    except (PolicyError, ValueError, argparse.ArgumentTypeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
