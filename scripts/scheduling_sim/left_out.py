"""Before / after table of the left-out-decoders rule (``ignition/helios/decide/left_out.py``).

    python -m scripts.scheduling_sim.left_out [--conv]

Runs Helios with the rule and without it (variant ``helios+keep-left-out``) on the real-world
study's workloads (``realworld.py``, quick plan): vLLM's recipe benchmark (random tokens,
4x H100, closed loop at concurrency 8 and 64), the long prompts arriving while 30 decoders
run (one H200), and with ``--conv`` the conversation trace's capacity at p99 TBT 100 ms /
TTFT 5 s on every profile (the slow part). Each row also shows the frames that carry a
prompt: how many, and how many decoders ride in them on average.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from ignition.simulate.harness import run_policy
from ignition.simulate.metrics import measure
from ignition.simulate.search import search
from scripts.scheduling_sim.realworld import (
    PROFILES,
    TARGET_SLO,
    Plan,
    conv_workload,
    long_prompt_workload,
    random_workload,
    setup_for,
)

POLICIES = ("helios+keep-left-out", "helios")
ENVELOPE = {8: 32, 64: 128}


def _prompt_frames(run) -> str:
    frames = [e for e in run.executions if e.prompt_tokens > 0]
    if not frames:
        return "-"
    riders = sum(e.decoders for e in frames) / len(frames)
    return f"{len(frames)} frames, {riders:.1f} decoders each"


def random_rows(policies: Sequence[str]) -> list[str]:
    rows = []
    for c in (8, 64):
        setup = setup_for("qwen38-flash-next-4xh100", c, ENVELOPE[c])
        for name in policies:
            run = run_policy(name, random_workload(c), setup)
            m = measure(run)
            rows.append(
                f"| random, 4x H100, c = {c} | `{name}` | {m.output_tokens_per_s:,.0f} tok/s | "
                f"p50 TPOT {m.tpot_ms.p50:.1f} ms | {_prompt_frames(run)} |"
            )
            print(rows[-1], file=sys.stderr, flush=True)
    return rows


def long_rows(plan: Plan, policies: Sequence[str], load: float = 0.5) -> list[str]:
    setup = setup_for("qwen38-flash-next-h200", 32, 128)
    full, half = long_prompt_workload(plan, load), long_prompt_workload(plan, load / 2)
    rows = []
    for name in policies:
        run = run_policy(name, full, setup)
        a, b = measure(run), measure(run_policy(name, half, setup))
        rows.append(
            f"| long prompts, H200, {load:g}/s | `{name}` | p99 TBT {a.tbt_ms.p99:.0f} ms | "
            f"p50 TTFT at {load / 2:g}/s {b.ttft_ms.p50 / 1e3:.2f} s | {_prompt_frames(run)} |"
        )
        print(rows[-1], file=sys.stderr, flush=True)
    return rows


def conv_rows(plan: Plan, policies: Sequence[str]) -> list[str]:
    """The realworld quick study's search (grid factor 2^(1/2), one bisection)."""
    rows = []
    for profile in PROFILES:
        setup = setup_for(profile, 32, 128)
        found, _ = search(
            policies,
            [TARGET_SLO],
            conv_workload(plan),
            setup,
            lo=0.0625,
            factor=2**0.5,
            bisections=1,
        )
        for c in found:
            rows.append(f"| conv mixed, {profile} | `{c.policy}` | capacity {c.rate:.3f} | | |")
            print(rows[-1], file=sys.stderr, flush=True)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conv", action="store_true", help="also the conversation capacity")
    parser.add_argument("--policies", default=",".join(POLICIES))
    args = parser.parse_args(argv)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    plan = Plan(True, (2000, 2200), long_prompts=20, decoder_output=2000)
    start = time.time()
    rows = random_rows(policies) + long_rows(plan, policies)
    if args.conv:
        rows += conv_rows(plan, policies)
    print("| workload | policy | result | | prompt-bearing frames |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\n({(time.time() - start) / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
