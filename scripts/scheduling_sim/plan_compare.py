"""Compare plan()'s cost between checkouts: alternating timings, or instruction counts.

    python -m scripts.scheduling_sim.plan_compare OLD NEW [--preset P] [--rounds 10]
    python -m scripts.scheduling_sim.plan_compare OLD NEW --instructions [--case loop]

Each checkout is a directory holding the repository (a worktree, or ``git archive``
unpacked). Timing runs ``benchmarks/helios_plan.py --loop --json --sizes 64`` in each,
alternating the order every round, and prints per case the median of the runs' CPU p50
with its range and the ratio to the first checkout. On a shared machine those ratios move
by several percent, so ``--instructions`` counts instead: CPython instructions per
plan() under valgrind (cachegrind, fixed hash seed, no address randomization, one BLAS
thread), the difference of 200 and 0 plans after the same warm-up, equal from run to run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve()
CASES = ("empty", "queued", "loop")


def timing(trees: list[Path], preset: str, rounds: int, iterations: int) -> None:
    runs: dict[str, dict[Path, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in range(rounds):
        for tree in trees if r % 2 == 0 else trees[::-1]:
            out = subprocess.run(
                [sys.executable, "benchmarks/helios_plan.py", "--iterations", str(iterations),
                 "--loop", "--json", "--sizes", "64", "--preset", preset],
                cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
                capture_output=True, text=True, check=True,
            ).stdout
            for line in out.splitlines():
                row = json.loads(line)
                runs[f"{row['mode']}/{row['queued_frames']}"][tree].append(row["cpu_p50_us"])
    print(f"preset {preset}, 64 requests, {rounds} alternating runs of {iterations} plans: "
          "median of the runs' cpu p50 in us [range], ratio to the first")
    for case, by_tree in runs.items():
        first = statistics.median(by_tree[trees[0]])
        cells = []
        for tree in trees:
            med, lo, hi = statistics.median(by_tree[tree]), min(by_tree[tree]), max(by_tree[tree])
            cells.append(f"{med:7.1f} [{lo:6.1f}-{hi:6.1f}] {med / first:.3f}")
        print(f"{case:15} " + " | ".join(cells))


def instructions_once(tree: Path, mode: str, preset: str, case: str, plans: int) -> int:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0",
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    command = ["setarch", "-R", "valgrind", "--tool=cachegrind", "--cache-sim=no",
               "--cachegrind-out-file=/dev/null", sys.executable, str(HERE), "--run",
               mode, preset, case, str(plans)]
    err = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True).stderr
    found = re.search(r"I\s+refs:\s+([\d,]+)", err)
    if found is None:
        raise RuntimeError(f"valgrind gave no instruction count in {tree}:\n{err[-2000:]}")
    return int(found.group(1).replace(",", ""))


def instructions(trees: list[Path], mode: str, preset: str, case: str) -> None:
    print(f"{mode} decode, preset {preset}, 64 requests, {case}: instructions per plan()")
    first = None
    for tree in trees:
        per_plan = (instructions_once(tree, mode, preset, case, 200)
                    - instructions_once(tree, mode, preset, case, 0)) // 200
        first = first or per_plan
        print(f"{str(tree):50} {per_plan:10,d} {per_plan / first:.3f}")


def run_plans(mode: str, preset: str, case: str, plans: int) -> None:
    """The measured process: warm up, then ``plans`` more steps of one benchmark case
    (empty queue, one queued frame, or the commit loop with its commits and completions)."""
    import random

    from ignition.helios.config import policy_from_preset
    from ignition.helios.types import Fence, RequestSpec
    from scripts.scheduling_sim import plan_bench as pb

    catalog, speculation = pb.runtime_catalog(mode)
    s = pb.prepared(catalog, 64, speculation, policy_from_preset(preset))
    if case != "empty":
        pb.queue_decode_frame(s)
    rng = random.Random(14)
    for i in range(20 + plans):
        if case != "loop":
            s.advance_to(s.now_ns + 1000 * (i % 3))
            s.plan()
            continue
        plan = s.plan()
        if plan is not None:
            s.commit(plan, Fence(s._last_fence + 1))
        if plan is None or len(s.queue) > 1:
            pb.complete_head(s, rng)
        for _ in range(64 - sum(1 for r in s.requests.values() if r.is_live)):
            s.admit(RequestSpec(3000, 200))


def main() -> None:
    if sys.argv[1:2] == ["--run"]:
        mode, preset, case, plans = sys.argv[2:6]
        sys.path.insert(0, os.getcwd())
        run_plans(mode, preset, case, int(plans))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", type=Path, help="checkouts, the first the reference")
    parser.add_argument("--preset", default="balanced")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--mode", default="adaptive", choices=("off", "fixed", "adaptive"))
    parser.add_argument("--case", default="empty", choices=CASES)
    args = parser.parse_args()
    trees = [t.resolve() for t in args.trees]
    if args.instructions:
        instructions(trees, args.mode, args.preset, args.case)
    else:
        timing(trees, args.preset, args.rounds, args.iterations)


if __name__ == "__main__":
    main()
