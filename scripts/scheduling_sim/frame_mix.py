"""Why a policy reaches the capacity it does: what its frames were, frame by frame.

    python -m scripts.scheduling_sim.frame_mix --slots 32 --load 1.0 \\
        --policies helios,vllm-k3,vllm-k5 [--tbt-ms 60] [--graphs]
    python -m scripts.scheduling_sim.frame_mix --profile qwen38-flash-next-4xh100 \\
        --rows 2000:2200 --load 0.707 --policies helios,vllm-padded --tbt-ms 100

Without ``--profile`` the trace runs as recorded on the simulator's default device (the
earlier H200 study); with it, the real-world study's setup (``scripts.scheduling_sim.realworld``:
that device profile, the conversation task mix, drafter confidence ``eagle2``).

For each policy at one load, prints per frame class (prefill only, mixed with a prompt,
generation by width): frames, device-time share, mean duration, mean prompt tokens,
mean decoders served, mean decoders left waiting; then the split of device time
between prompt and generation work, the mean decoders served per generation frame,
and, for every TBT gap above ``--tbt-ms``, which frames filled it (the causes of a
p99 TBT miss). Numbers are simulated (``ignition/simulate``), not measured.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
from collections import Counter, defaultdict
from collections.abc import Sequence

from ignition.simulate.command import TraceSpec, trace_workload
from ignition.simulate.harness import Setup, run_policy
from ignition.simulate.metrics import measure, percentile
from ignition.simulate.results import ExecutionRecord, RunResult
from ignition.simulate import traces

TRACE = str(traces.CONV)
ENVELOPE = {4: 6, 32: 128}


def frame_class(e: ExecutionRecord) -> str:
    """prefill / mixed-W (a prompt and decoders) / gen-W (decoders only)."""
    if e.prompt_tokens and not e.decoders:
        return "prefill"
    if e.prompt_tokens:
        return f"mixed-w{e.width}"
    return f"gen-w{e.width}"


def frame_table(run: RunResult) -> list[str]:
    groups: dict[str, list[ExecutionRecord]] = defaultdict(list)
    for e in run.executions:
        groups[frame_class(e)].append(e)
    total = sum(e.device_ms for e in run.executions) or 1.0
    lines = [
        f"  {'class':<10} {'frames':>7} {'time%':>6} {'ms':>6} {'prompt':>7} "
        f"{'decoders':>8} {'waiting':>8}"
    ]
    for name in sorted(groups):
        es = groups[name]
        n = len(es)
        lines.append(
            f"  {name:<10} {n:>7} {100 * sum(e.device_ms for e in es) / total:>5.1f}% "
            f"{sum(e.device_ms for e in es) / n:>6.1f} {sum(e.prompt_tokens for e in es) / n:>7.0f}"
            f" {sum(e.decoders for e in es) / n:>8.1f} {sum(e.idle_decoders for e in es) / n:>8.1f}"
        )
    graphs = Counter(e.graph for e in run.executions)
    lines.append("  most used graphs: " + ", ".join(f"{g} x{n}" for g, n in graphs.most_common(6)))
    return lines


def graph_table(run: RunResult, top: int = 8) -> list[str]:
    """The most used decoder-only speculative graphs: how full their cohorts were and how
    many target rows each decoder got (``--graphs``; a ragged program's extra rows per
    decoder come from its row budget shared by fewer lanes than its batch capacity)."""
    groups: dict[str, list[ExecutionRecord]] = defaultdict(list)
    for e in run.executions:
        if e.decoders and not e.prompt_tokens and e.width > 1:
            groups[e.graph].append(e)
    lines = [f"  {'speculative graph':<36} {'frames':>6} {'decoders':>8} {'rows/dec':>8} {'ms':>6}"]
    for graph, es in sorted(groups.items(), key=lambda kv: -len(kv[1]))[:top]:
        decoders = sum(e.decoders for e in es)
        lines.append(
            f"  {graph:<36} {len(es):>6} {decoders / len(es):>8.1f} "
            f"{sum(e.tokens for e in es) / decoders:>8.2f} "
            f"{sum(e.device_ms for e in es) / len(es):>6.1f}"
        )
    return lines


def gap_causes(run: RunResult, tbt_ms: float) -> list[str]:
    """For each TBT gap above ``tbt_ms``: the classes of the frames that ended inside it."""
    ends = [e.end_ms for e in run.executions]
    causes: Counter[str] = Counter()
    gaps = 0
    for r in run.requests:
        times = [t for t, _ in r.deliveries]
        for a, b in itertools.pairwise(times):
            if b - a <= tbt_ms:
                continue
            gaps += 1
            lo = bisect.bisect_right(ends, a + 1e-9)
            hi = bisect.bisect_right(ends, b + 1e-9)
            inside = [frame_class(e) for e in run.executions[lo:hi]]
            if len(inside) == 1:
                causes[f"one frame {inside[0]}"] += 1
            else:
                skipped = "+".join(sorted(set(inside[:-1])))
                causes[f"skipped by {skipped}"] += 1
    samples = sum(max(0, len(r.deliveries) - 1) for r in run.requests) or 1
    lines = [f"  TBT gaps > {tbt_ms:g} ms: {gaps} of {samples} ({100 * gaps / samples:.2f}%)"]
    for cause, n in causes.most_common(8):
        lines.append(f"    {n:>6}  {cause}")
    return lines


def ttft_split(run: RunResult) -> str:
    """Median wait before the first prompt frame starts, and from there to first output."""
    waits = [
        r.prompt_start_ms - r.arrival_ms for r in run.requests if r.prompt_start_ms is not None
    ]
    rest = [
        r.first_output_ms - r.prompt_start_ms
        for r in run.requests
        if r.prompt_start_ms is not None and r.first_output_ms is not None
    ]
    return (
        f"  TTFT split (p50): {percentile(waits, 0.5):.1f} ms until the first prompt frame "
        f"starts, {percentile(rest, 0.5):.1f} ms from there to the first output"
    )


def summary(run: RunResult) -> list[str]:
    m = measure(run)
    gen = [e for e in run.executions if e.decoders]
    total = sum(e.device_ms for e in run.executions) or 1.0
    prompt_only = sum(e.device_ms for e in run.executions if not e.decoders)
    served = sum(e.decoders for e in gen) / max(1, len(gen))
    waiting = sum(e.idle_decoders for e in gen) / max(1, len(gen))
    tokens = sum(e.tokens - e.prompt_tokens for e in gen) / max(1, sum(e.decoders for e in gen))
    return [
        f"  finished {m.finished}/{m.requests}{' (stopped)' if m.aborted else ''}; "
        f"TTFT p50 {m.ttft_ms.p50 / 1e3:.3f} s p99 {m.ttft_ms.p99 / 1e3:.2f} s; "
        f"TBT p50 {m.tbt_ms.p50:.1f} p99 {m.tbt_ms.p99:.1f} ms; TPOT p50 {m.tpot_ms.p50:.1f} ms",
        f"  prompt-only frames {100 * prompt_only / total:.1f}% of device time; generation "
        f"frames serve {served:.1f} decoders, leave {waiting:.1f} waiting, "
        f"verify {tokens:.2f} target tokens per decoder",
        f"  output {run.output_tokens / max(1e-9, run.end_ms / 1e3):.0f} tok/s over "
        f"{run.end_ms / 1e3:.1f} s",
        ttft_split(run),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="frame_mix")
    parser.add_argument("--slots", type=int, default=32)
    parser.add_argument("--load", type=float, default=1.0)
    parser.add_argument("--rows", default="2000:2600")
    parser.add_argument("--policies", default="helios,vllm-k3,vllm-k5")
    parser.add_argument("--tbt-ms", type=float, default=60.0)
    parser.add_argument("--envelope", type=int, default=0, help="R; 0: the study's")
    parser.add_argument(
        "--profile", default="", help="a real-world device profile (docs/devices.md)"
    )
    parser.add_argument(
        "--graphs", action="store_true", help="also the most used speculative graphs"
    )
    parser.add_argument(
        "--ttft-guard-s",
        type=float,
        default=0.0,
        help="stop a run once more than 1%% of requests are later than this (the capacity "
        "search's guard); 0: run to the end",
    )
    args = parser.parse_args(argv)
    a, b = (int(x) for x in args.rows.split(":"))
    envelope = args.envelope or ENVELOPE.get(args.slots, 128)
    if args.profile:
        from scripts.scheduling_sim.realworld import Plan, conv_workload, setup_for

        workload = conv_workload(Plan(quick=True, rows=(a, b)))
        setup = setup_for(args.profile, args.slots, envelope)
    else:
        workload = trace_workload(TraceSpec(TRACE, a, b - a))
        setup = Setup(slots=args.slots, speculative_token_capacity=envelope)
    for policy in args.policies.split(","):
        guard = args.ttft_guard_s * 1e3 if args.ttft_guard_s > 0 else None
        run = run_policy(policy, workload(args.load), setup, guard)
        where = f" on {args.profile}" if args.profile else ""
        print(f"{policy} at load {args.load:g}, {args.slots} slots, R = {envelope}{where}")
        for line in (*summary(run), *frame_table(run), *gap_causes(run, args.tbt_ms)):
            print(line)
        for line in graph_table(run) if args.graphs else []:
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
