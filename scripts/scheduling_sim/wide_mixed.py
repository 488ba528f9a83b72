"""What wider mixed widths at more prompt buckets cost and buy (issue 29, item 4).

    python -m scripts.scheduling_sim.wide_mixed [--capacity] [--buckets 2048]

Cost: the programs ``--mixed-wide-prompt-buckets`` adds to the qwen38 catalog at 4, 32
and 64 slots (with the speculative token capacity R of each), and the largest packed
extent before and after: CUDA graphs share one memory pool, so the pool's peak is set
by the widest program, and programs below it add only their own graph bookkeeping (the
per-program capture bytes a GPU build reports; ``scripts/gpu_check.sh`` measures them).
Benefit (``--capacity``, slow): capacity at p99 TBT 100 ms / TTFT 5 s on the
conversation trace with the mixed task mix (``realworld.py``'s quick search), Helios
with and without the wider buckets on each profile at 32 slots.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ignition.components.capacity import plan_catalog
from ignition.components.program_kinds import GraphKind
from ignition.recipes import LoadOptions, get_recipe
from ignition.simulate.search import search
from scripts.scheduling_sim.realworld import PROFILES, TARGET_SLO, Plan, conv_workload, setup_for

SIZES = ((4, None), (32, 128), (64, 192))


def cost_lines(buckets: tuple[int, ...]) -> list[str]:
    recipe = get_recipe("qwen38")
    lines = [
        "| slots | R | programs | added | mixed speculative "
        "| largest packed extent, before / after |",
        "|---|---|---|---|---|---|",
    ]
    for slots, r in SIZES:
        base = LoadOptions(mixed_prefill=True, concurrency=slots, speculative_token_capacity=r)
        wide = LoadOptions(**{**base.__dict__, "mixed_wide_prompt_buckets": buckets})
        a, b = plan_catalog(recipe, base), plan_catalog(recipe, wide)
        extent = [max(d.max_packed_extent for d in c.descriptors) for c in (a, b)]
        mixed = [
            sum(1 for d in c.of_kind(GraphKind.MIXED) if d.speculation_enabled) for c in (a, b)
        ]
        n, m = len(a.descriptors), len(b.descriptors)
        lines.append(
            f"| {slots} | {r or recipe.capacity.speculative_token_capacity} | {n} -> {m} | "
            f"{m - n} | {mixed[0]} -> {mixed[1]} | {extent[0]} / {extent[1]} |"
        )
    return lines


def capacity_lines(buckets: tuple[int, ...]) -> list[str]:
    if buckets != (2048,):
        raise SystemExit("--capacity measures the simulator's wide-mixed variant (2048) only")
    plan = Plan(True, (2000, 2200), long_prompts=20, decoder_output=2000)
    lines = ["| profile | `helios` | `helios+wide-mixed` | ratio |", "|---|---|---|---|"]
    for profile in PROFILES:
        found, _ = search(
            ["helios", "helios+wide-mixed"],
            [TARGET_SLO],
            conv_workload(plan),
            setup_for(profile, 32, 128),
            lo=0.0625,
            factor=2**0.5,
            bisections=1,
        )
        caps = {c.policy: c.rate for c in found}
        a, b = caps["helios"], caps["helios+wide-mixed"]
        lines.append(f"| {profile} | {a:.3f} | {b:.3f} | {b / a:.2f}x |" if a else "")
        print(lines[-1], flush=True)
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buckets", default="2048", help="comma-separated prompt buckets")
    parser.add_argument("--capacity", action="store_true", help="also the simulated capacity")
    args = parser.parse_args(argv)
    buckets = tuple(int(b) for b in args.buckets.split(",") if b.strip())
    print("\n".join(cost_lines(buckets)))
    if args.capacity:
        print()
        print("\n".join(capacity_lines(buckets)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
