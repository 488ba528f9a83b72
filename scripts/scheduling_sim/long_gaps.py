"""Which frames make long prompts' worst inter-token gaps (issue 39, session 16).

    python -m scripts.scheduling_sim.long_gaps [POLICIES] [--over MS]

Runs the long-prompt workload of ``objective_rules --long`` at 0.5/s (30 decoders, 20
prompts of 2,000-8,000 tokens, one H200) and prints p99 TBT, how many gaps there are and
the p99's rank, and every frame that overlaps a gap longer than ``--over`` ms (default
75, the objective preset's TBT target): its program, execution class, decoders and how
many of those gaps it lies in. A frame delaying ~30 decoders at once adds ~30 such gaps,
so a dozen long frames move p99. Numbers are simulated.
"""

from __future__ import annotations

import argparse
import itertools
from collections import Counter
from collections.abc import Sequence

from ignition.simulate.harness import run_policy
from ignition.simulate.metrics import measure, tbt_samples
from ignition.simulate.results import RunResult
from scripts.scheduling_sim.objective_rules import QUICK
from scripts.scheduling_sim.realworld import long_prompt_workload, setup_for

MIN_GAPS = 4  # a frame behind fewer of the long gaps is the one beside a long frame


def long_gaps(run: RunResult, over_ms: float) -> list[tuple[float, float]]:
    """Every request's inter-token gap longer than ``over_ms``: (from, to) in ms."""
    return [
        (t0, t1)
        for r in run.requests
        for (t0, _), (t1, _) in itertools.pairwise(r.deliveries)
        if t1 - t0 > over_ms
    ]


def frames_behind(run: RunResult, gaps: Sequence[tuple[float, float]]) -> Counter:
    """(start, program, class, decoders) of each frame carrying no prompt -> how many of
    ``gaps`` it overlaps."""
    frames: Counter = Counter()
    for t0, t1 in gaps:
        for e in run.executions:
            if e.end_ms > t0 and e.start_ms < t1 and e.prompt_tokens == 0:
                frames[(e.start_ms, e.graph, str(e.execution_class), e.decoders)] += 1
    return frames


def census(name: str, over_ms: float) -> list[str]:
    setup = setup_for("qwen38-flash-next-h200", 32, 128)
    run = run_policy(name, long_prompt_workload(QUICK, 0.5), setup)
    gaps = long_gaps(run, over_ms)
    count = len(tbt_samples(run))
    lines = [
        f"`{name}`: p99 TBT {measure(run).tbt_ms.p99:.0f} ms; {count:,} gaps, p99 is the "
        f"{count // 100 + 1:,}th largest; {len(gaps):,} gaps over {over_ms:g} ms",
        "| start | program | class | decoders | gaps over it |",
        "|---|---|---|---|---|",
    ]
    for (start, graph, klass, decoders), n in sorted(frames_behind(run, gaps).items()):
        if n >= MIN_GAPS:
            lines.append(f"| {start / 1e3:.1f} s | `{graph}` | {klass} | {decoders} | {n} |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policies", nargs="?", default="helios,helios+at-once")
    parser.add_argument("--over", type=float, default=75.0, metavar="MS")
    args = parser.parse_args(argv)
    if not args.over > 0:
        parser.error(f"--over {args.over}: must be a positive number of ms")
    for name in (p.strip() for p in args.policies.split(",") if p.strip()):
        print("\n".join(census(name, args.over)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
