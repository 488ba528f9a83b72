"""Speculative token capacity R for 32 and 64 slots: the qwen38 recipe's defaults.

    python -m scripts.scheduling_sim.envelopes [--conv]

Helios on catalogs built with each R (variant ``helios+rN``): vLLM's recipe benchmark
(random tokens, closed loop, 4x H100 profile) at concurrency 32 and 64, and with
``--conv`` the conversation trace's capacity at p99 TBT 100 ms / TTFT 5 s at 32 slots on
the H200 profile (``realworld.py``'s quick search; slow). Also the catalog size each R
costs. The recipe's ``capacity.concurrency_defaults`` are chosen from this table.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ignition.components.capacity import plan_catalog
from ignition.recipes import LoadOptions, get_recipe
from ignition.simulate.harness import run_policy
from ignition.simulate.metrics import measure
from ignition.simulate.search import search
from scripts.scheduling_sim.realworld import (
    TARGET_SLO,
    Plan,
    conv_workload,
    random_workload,
    setup_for,
)

ENVELOPES = {32: (32, 64, 128, 192), 64: (64, 128, 192, 256)}


def programs(slots: int, r: int) -> int:
    options = LoadOptions(mixed_prefill=True, concurrency=slots, speculative_token_capacity=r)
    return len(plan_catalog(get_recipe("qwen38"), options).descriptors)


def random_lines() -> list[str]:
    lines = ["| slots | R | programs | random tok/s (4x H100) |", "|---|---|---|---|"]
    for slots, envelopes in ENVELOPES.items():
        setup = setup_for("qwen38-flash-next-4xh100", slots, envelopes[0])
        for r in envelopes:
            m = measure(run_policy(f"helios+r{r}", random_workload(slots), setup))
            lines.append(f"| {slots} | {r} | {programs(slots, r)} | {m.output_tokens_per_s:,.0f} |")
            print(lines[-1], flush=True)
    return lines


def conv_lines() -> list[str]:
    plan = Plan(True, (2000, 2200), long_prompts=20, decoder_output=2000)
    names = [f"helios+r{r}" for r in ENVELOPES[32]]
    found, _ = search(
        names,
        [TARGET_SLO],
        conv_workload(plan),
        setup_for("qwen38-flash-next-h200", 32, 128),
        lo=0.0625,
        factor=2**0.5,
        bisections=1,
    )
    lines = ["| slots | R | conv capacity (H200) |", "|---|---|---|"]
    lines += [f"| 32 | {c.policy.split('+r')[1]} | {c.rate:.3f} |" for c in found]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conv", action="store_true", help="also the conversation capacity")
    args = parser.parse_args(argv)
    print("\n".join(random_lines()))
    if args.conv:
        print()
        print("\n".join(conv_lines()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
