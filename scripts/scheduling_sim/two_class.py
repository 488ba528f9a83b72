"""Two acceptance classes at overload: does the policy verify the good drafts wider?

    python -m scripts.scheduling_sim.two_class [--profile P] [--requests N] [--jobs 2] [--frames]

Issue 40's workload: half the requests draft at 0.9 conditional acceptance per position,
half at 0.35, all arriving at once (overload: throughput is what the device sustains).
For each policy it prints output tokens/s against no speculation and each class's mean
verification width (target rows per round, 1 + drafts) and tokens per round. The target:
Helios's throughput >= the best of no speculation, fixed K and adaptive verification,
and the 0.9 class verifying wider than the 0.35 class. ``--frames`` adds, per policy, where
its device time went: each program's frames, share of device time, decoders per frame and
output tokens per ms (tokens delivered at that frame's end), and how many frames were
acceptance-learning probes. Numbers are simulated (``ignition/simulate``), not measured.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ignition.simulate.devices import DeviceError, device_from_spec
from ignition.simulate.harness import Setup, run_policy
from ignition.simulate.metrics import measure
from ignition.simulate.results import RunResult
from ignition.simulate.baselines import PolicyError
from ignition.simulate.workloads import SimRequest
from scripts.scheduling_sim.realworld import pool_map

HIGH, LOW = 0.9, 0.35
DEPTH = 8
POLICIES = (
    "helios",
    "vllm-padded",
    "vllm-k1-padded",
    "vllm-k2-padded",
    "vllm-k3-padded",
    "vllm-k5-padded",
    "vllm-adaptive-padded",
)


def workload(count: int, prompt: int = 512, output: int = 256) -> list[SimRequest]:
    """``count`` requests at time zero, alternating 0.9 and 0.35 acceptance."""
    return [
        SimRequest(0.0, prompt, output, ((HIGH if i % 2 == 0 else LOW),) * DEPTH, task=str(i % 2))
        for i in range(count)
    ]


@dataclass(frozen=True)
class ProgramShare:
    """One program's part of a run: frames, device ms, decoders served, output tokens."""

    graph: str
    frames: int
    device_ms: float
    decoders: int
    output_tokens: int


def frame_breakdown(run: RunResult) -> tuple[list[ProgramShare], int]:
    """Per program, most device time first, and the number of acceptance-learning probe
    frames. A delivery belongs to the frame that ended when it was published."""
    by_end = {round(e.end_ms, 6): e.graph for e in run.executions}
    output: Counter[str] = Counter()
    for r in run.requests:
        for t_ms, n in r.deliveries:
            graph = by_end.get(round(t_ms, 6))
            if graph is not None:
                output[graph] += n
    frames: Counter[str] = Counter()
    device: Counter[str] = Counter()
    decoders: Counter[str] = Counter()
    probes = 0
    for e in run.executions:
        frames[e.graph] += 1
        device[e.graph] += e.end_ms - e.start_ms
        decoders[e.graph] += e.decoders
        probes += e.execution_class == "acceptance_learning"
    shares = [
        ProgramShare(g, frames[g], device[g], decoders[g], output[g])
        for g in sorted(frames, key=lambda g: -device[g])
    ]
    return shares, probes


def frame_lines(name: str, shares: list[ProgramShare], probes: int, top: int = 8) -> list[str]:
    total = sum(s.device_ms for s in shares) or 1.0
    lines = [
        f"`{name}`: {probes} acceptance-learning probe frames",
        "",
        "| program | frames | device time | decoders / frame | output tok / ms |",
        "|---|---|---|---|---|",
    ]
    for s in shares[:top]:
        lines.append(
            f"| `{s.graph}` | {s.frames} | {s.device_ms / 1e3:.1f} s ({s.device_ms / total:.0%}) "
            f"| {s.decoders / s.frames:.1f} | {s.output_tokens / max(s.device_ms, 1e-9):.3f} |"
        )
    return [*lines, ""]


def one(
    name: str, profile: str, count: int, slots: int, envelope: int, frames: bool = False
) -> dict:
    setup = Setup(
        slots=slots, speculative_token_capacity=envelope, device=device_from_spec(profile)
    )
    run = run_policy(name, workload(count), setup)
    m = measure(run)
    out = {"policy": name, "tok_s": m.output_tokens_per_s, "p99_tbt": m.tbt_ms.p99}
    for label, parity in (("high", 0), ("low", 1)):
        recs = [r for r in run.requests if r.id % 2 == parity]
        rounds = sum(r.rounds for r in recs)
        rows = sum(r.verified_rows for r in recs)
        tokens = sum(n for r in recs for _, n in r.deliveries) - len(recs)  # less first token
        out[label] = (rows / rounds if rounds else 0.0, tokens / rounds if rounds else 0.0)
    if frames:
        out["frames"] = frame_lines(name, *frame_breakdown(run))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="qwen38-flash-next-h200")
    parser.add_argument("--requests", type=int, default=128)
    parser.add_argument("--slots", type=int, default=32)
    parser.add_argument("--envelope", type=int, default=128, help="speculative token capacity R")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument(
        "--frames", action="store_true", help="also print where each policy's device time went"
    )
    args = parser.parse_args(argv)
    try:
        device_from_spec(args.profile)
        if args.requests < 2:
            raise ValueError(f"--requests = {args.requests}: need at least 2")
        names = [p.strip() for p in args.policies.split(",") if p.strip()]
        calls = [
            (n, args.profile, args.requests, args.slots, args.envelope, args.frames)
            for n in names
        ]
        results = pool_map(one, calls, args.jobs)
    except (DeviceError, PolicyError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    plain = next((r["tok_s"] for r in results if r["policy"] == "vllm-padded"), None)
    print(
        "| policy | tok/s | vs no speculation | p99 TBT | 0.9 class: width, tokens/round "
        "| 0.35 class: width, tokens/round |"
    )
    print("|---|---|---|---|---|---|")
    for r in results:
        ratio = f"{r['tok_s'] / plain:.2f}x" if plain else "-"
        print(
            f"| `{r['policy']}` | {r['tok_s']:,.0f} | {ratio} | {r['p99_tbt']:.0f} ms | "
            f"{r['high'][0]:.2f}, {r['high'][1]:.2f} | {r['low'][0]:.2f}, {r['low'][1]:.2f} |"
        )
    for r in results:
        if "frames" in r:
            print("\n" + "\n".join(r["frames"]), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
