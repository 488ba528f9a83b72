"""The share of computed tokens that are padding, per workload, for Helios variants
(issue 39, item 4), beside what each run delivered.

    python -m scripts.scheduling_sim.token_padding                      # every workload
    python -m scripts.scheduling_sim.token_padding --workloads conv \\
        --policies helios+seed-buckets,helios,helios+lanes4

A prepared program computes its whole capacity: packed rows plus the prompt bucket
(``Descriptor.packed_capacity + prefill_capacity``; a prefill program's bucket). Of
those tokens, *prompt padding* is the bucket its prompt lanes left empty and *row
padding* the packed rows no decoder used (unused batch rows and verification rows);
padding share = (prompt + row padding) / computed. *prompt-frame s* is the device time
of the frames that carried prompt tokens, *busy s* that of every execution (what padding
costs shows as their difference between variants on one workload). Workloads are the
real-world study's (``realworld.py``, quick sizes): ``random`` (4x H100, concurrency
64), ``conv`` (the conversation trace at half load, 32 slots, H200; ``conv-4xh100`` and
``conv-dense`` the same on 4x H100 and the dense 27B) and ``long`` (long prompts while
30 decode, H200, 0.25 prompts/s). ``helios+seed-buckets`` is the catalog without the
qwen38 recipe's more_prompt_buckets (the before row). Numbers are simulated.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.simulate.harness import Setup, helios_simulation
from ignition.simulate.metrics import measure
from ignition.simulate.results import RunResult
from ignition.simulate.workloads import SimRequest
from scripts.scheduling_sim.realworld import (
    Plan,
    conv_workload,
    long_prompt_workload,
    random_workload,
    setup_for,
)

POLICIES = ("helios+seed-buckets", "helios", "helios+l1", "helios+lanes4")


@dataclass
class Padding:
    """Token totals of one run's executions."""

    computed: int = 0
    prompt_padding: int = 0
    row_padding: int = 0
    multi_lane_frames: int = 0
    prompt_frames: int = 0
    prompt_frame_ms: float = 0.0  # device time of the frames that carried prompt tokens
    busy_ms: float = 0.0  # device time of every execution

    @property
    def share(self) -> float:
        return (self.prompt_padding + self.row_padding) / max(1, self.computed)


def padding_of(run: RunResult, descriptors: dict[str, Descriptor]) -> Padding:
    """Totals over ``run``'s executions; ``descriptors`` maps program names to programs."""
    out = Padding()
    for e in run.executions:
        out.busy_ms += e.device_ms
        out.prompt_frame_ms += e.device_ms if e.prompt_tokens else 0.0
        d = descriptors.get(e.graph)
        if d is None or d.kind not in (GraphKind.PREFILL, GraphKind.MIXED, GraphKind.DECODE,
                                       GraphKind.SPECULATIVE):
            continue
        bucket = d.prefill_capacity if d.kind is GraphKind.MIXED else 0
        rows = d.packed_capacity if d.kind is not GraphKind.PREFILL else 0
        if d.kind is GraphKind.PREFILL:
            bucket = d.packed_capacity
        out.computed += bucket + rows
        out.prompt_padding += max(0, bucket - e.prompt_tokens)
        out.row_padding += max(0, rows - (e.tokens - e.prompt_tokens))
        if e.prompt_tokens:
            out.prompt_frames += 1
            lanes = e.rows - e.decoders
            out.multi_lane_frames += lanes > 1
    return out


def rebucketed_share(
    run: RunResult, pad: Padding, buckets: Sequence[int], extra: Sequence[int]
) -> float:
    """The padding share ``run`` would have left had each frame's prompt tokens gone into
    the smallest of ``buckets`` + ``extra`` holding them (rows as run; an offline estimate:
    with other buckets Helios may chunk prompts differently)."""
    grid = sorted({*buckets, *extra})
    prompt = sum(
        min((b for b in grid if b >= e.prompt_tokens), default=e.prompt_tokens) - e.prompt_tokens
        for e in run.executions
        if e.prompt_tokens
    )
    computed = pad.computed - pad.prompt_padding + prompt
    return (prompt + pad.row_padding) / max(1, computed)


def run(name: str, requests: list[SimRequest], setup: Setup) -> tuple[RunResult, Padding]:
    result, pad, _ = run_with_buckets(name, requests, setup)
    return result, pad


def run_with_buckets(
    name: str, requests: list[SimRequest], setup: Setup
) -> tuple[RunResult, Padding, list[int]]:
    """``run`` and the prompt buckets of the catalog it ran."""
    sim = helios_simulation(requests, setup, name)
    result = sim.run_result(name)
    catalog = sim.scenario.catalog.descriptors
    descriptors = {d.name: d for d in catalog}
    buckets = sorted({d.token_capacity for d in catalog if d.kind is GraphKind.PREFILL})
    return result, padding_of(result, descriptors), buckets


def workloads(only: Sequence[str]) -> dict[str, Callable[[], tuple[list[SimRequest], Setup]]]:
    quick = Plan(True)
    conv = conv_workload(quick)
    found = {
        "random": lambda: (
            random_workload(64),
            setup_for("qwen38-flash-next-4xh100", 64, 128),
        ),
        "conv": lambda: (conv(0.5), setup_for("qwen38-flash-next-h200", 32, 128)),
        "conv-4xh100": lambda: (conv(0.5), setup_for("qwen38-flash-next-4xh100", 32, 128)),
        "conv-dense": lambda: (conv(0.5), setup_for("qwen38-27b-dense-h200", 32, 128)),
        "long": lambda: (
            long_prompt_workload(quick, 0.25),
            setup_for("qwen38-flash-next-h200", 32, 128),
        ),
    }
    return {k: v for k, v in found.items() if not only or k in only}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--workloads", default="", help="comma-separated: random,conv,...")
    parser.add_argument(
        "--rebucket",
        default="",
        help="semicolon-separated bucket lists, e.g. '1152,1280;1280': after the table, the "
        "share each policy's prompt frames would leave with those buckets added (offline)",
    )
    args = parser.parse_args(argv)
    only = [w for w in args.workloads.split(",") if w]
    extras = [[int(b) for b in group.split(",") if b] for group in args.rebucket.split(";")]
    offline: list[str] = []
    print(
        "| workload | policy | padding share | prompt padding | row padding | multi-lane "
        "prompt frames | prompt-frame s | busy s | out tok/s | p50 TTFT s | p99 TBT ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for workload, make in workloads(only).items():
        requests, setup = make()
        for name in args.policies.split(","):
            result, pad, buckets = run_with_buckets(name, requests, setup)
            m = measure(result)
            computed = max(1, pad.computed)
            print(
                f"| {workload} | `{name}` | {pad.share:.1%} | "
                f"{pad.prompt_padding / computed:.1%} | {pad.row_padding / computed:.1%} | "
                f"{pad.multi_lane_frames} / {pad.prompt_frames} | "
                f"{pad.prompt_frame_ms / 1e3:.1f} | {pad.busy_ms / 1e3:.1f} | "
                f"{m.output_tokens_per_s:,.0f} | {m.ttft_ms.p50 / 1e3:.3f} | "
                f"{m.tbt_ms.p99:.1f} |",
                flush=True,
            )
            offline += [
                f"| {workload} | `{name}` | {', '.join(map(str, extra))} | {len(buckets)} + "
                f"{len(set(extra) - set(buckets))} | "
                f"{rebucketed_share(result, pad, buckets, extra):.1%} |"
                for extra in extras
                if args.rebucket
            ]
    if offline:
        print("\n| workload | ran | buckets added | buckets | padding share (offline) |")
        print("|---|---|---|---|---|")
        print("\n".join(offline))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
