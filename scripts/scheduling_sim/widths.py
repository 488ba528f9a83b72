"""Adaptive speculation against every fixed width, Helios's own and vLLM-style.

    python -m scripts.scheduling_sim.widths [--jobs 2] [--out docs/capacity/widths.json]

The issue's target "adaptive speculation never below the best fixed width at any load"
asks two questions, and this measurement separates them:

- *the width choice*: Helios adaptive against Helios at each fixed width on the same
  catalog (``helios+wN``: fixed speculation, load-time selection of that width's
  programs), under the seed's balanced preset, its throughput preset, and the what-if
  catalog with wider mixed widths also at the 2048 prompt bucket;
- *everything else*: Helios at width N against ``vllm-k(N-1)`` (the same verification
  width on an eager engine, and on vLLM's padded capture sizes).

Each cell is one run at one load (the capacity search's 10 s guard stops an overloaded
run, shown as "stopped"): p50 TPOT, p99 TTFT, p99 TBT and target rows per decoder per
generation frame. Writes the results as JSON (``capacity_study --width-results``
renders them into ``docs/capacity.md``) and prints the tables. Numbers are simulated
(``ignition/simulate``), not measured.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ignition.simulate.command import TraceSpec, trace_workload
from ignition.simulate.harness import Setup, run_policy
from ignition.simulate.metrics import measure
from ignition.simulate import traces

TRACE = str(traces.CONV)
ROWS = (2000, 2600)
GUARD_MS = 10_000.0
ENVELOPE = {4: 6, 32: 128}
# (slots, loads, families): each family is an adaptive policy and its fixed widths
MATRIX: tuple[tuple[int, tuple[float, ...], tuple[tuple[str, tuple[str, ...]], ...]], ...] = (
    (
        32,
        (0.5, 0.707, 1.0),
        (
            ("helios", ("helios+w2", "helios+w3", "helios+w4")),
            (
                "helios+throughput",
                ("helios+throughput+w2", "helios+throughput+w3", "helios+throughput+w4"),
            ),
            (
                "helios+wide-mixed",
                ("helios+wide-mixed+w2", "helios+wide-mixed+w3", "helios+wide-mixed+w4"),
            ),
            ("", ("vllm-k1", "vllm-k2", "vllm-k3", "vllm-k5")),
            ("", ("vllm-k1-padded", "vllm-k2-padded", "vllm-k3-padded")),
        ),
    ),
    (
        4,
        (0.354,),
        (
            ("helios", ("helios+w2",)),
            ("helios+r8", ("helios+r8+w2", "helios+r8+w3")),
            ("helios+r8+throughput", ("helios+r8+throughput+w2",)),
            ("helios+r8+wide-mixed", ("helios+r8+wide-mixed+w2",)),
            ("", ("vllm-k1", "vllm-k2", "vllm-k1-padded")),
        ),
    ),
)
DEFAULT_OUT = "docs/capacity/widths.json"
COMMAND = f"python -m scripts.scheduling_sim.widths --jobs 2 --out {DEFAULT_OUT}"


def run_cell(job: tuple[int, float, str, tuple[int, int]]) -> tuple[int, float, str, dict]:
    slots, load, policy, rows = job
    workload = trace_workload(TraceSpec(TRACE, rows[0], rows[1] - rows[0]))
    setup = Setup(slots=slots, speculative_token_capacity=ENVELOPE[slots])
    run = run_policy(policy, workload(load), setup, GUARD_MS)
    m = measure(run)
    gen = [e for e in run.executions if e.decoders]
    decoders = sum(e.decoders for e in gen)
    rows = sum(e.tokens - e.prompt_tokens for e in gen)
    return (
        slots,
        load,
        policy,
        {
            "tpot_p50_ms": m.tpot_ms.p50,
            "ttft_p50_s": m.ttft_ms.p50 / 1e3,
            "ttft_p99_s": m.ttft_ms.p99 / 1e3,
            "tbt_p99_ms": m.tbt_ms.p99,
            "rows_per_decoder": rows / max(1, decoders),
            "finished": m.finished,
            "requests": m.requests,
            "stopped": bool(m.aborted or m.finished < m.requests),
        },
    )


def jobs(rows: tuple[int, int] = ROWS) -> list[tuple[int, float, str, tuple[int, int]]]:
    out = []
    for slots, loads, families in MATRIX:
        for load in loads:
            for adaptive, fixed in families:
                names = ((adaptive,) if adaptive else ()) + fixed
                out += [(slots, load, p, rows) for p in names]
    return out


def _cell(r: dict) -> str:
    if r["stopped"]:
        return f"| stopped ({r['finished']}/{r['requests']}) | | | |"
    return (
        f"| {r['tpot_p50_ms']:.1f} | {r['ttft_p99_s']:.2f} | {r['tbt_p99_ms']:.1f} "
        f"| {r['rows_per_decoder']:.2f} |"
    )


def _key(r: dict) -> tuple[float, float]:
    """A run's rank among fixed widths: finished runs first, then p50 TPOT."""
    return (1.0 if r["stopped"] else 0.0, r["tpot_p50_ms"])


def fixed_width_section(data: dict) -> list[str]:
    """Markdown tables: every cell, then adaptive against the best fixed width."""
    lines = [
        "Adaptive speculation against fixed widths, one run per cell (p50 TPOT ms, p99 TTFT"
        " s, p99 TBT ms, target rows per decoder in generation frames; 10 s guard)."
        f" Regenerate with `{COMMAND}`, then `capacity_study --render-only ..."
        f" --width-results {DEFAULT_OUT}` (`capacity_study --page` reads it).",
        "",
    ]
    summary = [
        "| slots | load | adaptive | TPOT | p99 TTFT | p99 TBT | best fixed (TPOT) | TPOT "
        "| p99 TTFT | p99 TBT |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for slots, loads, families in MATRIX:
        for load in loads:
            cells = data.get(str(slots), {}).get(str(load), {})
            if not cells:
                continue
            lines += [
                f"{slots} slots, load {load:g}:",
                "",
                "| policy | TPOT p50 | TTFT p99 | TBT p99 | rows/decoder |",
                "|---|---|---|---|---|",
            ]
            for adaptive, fixed in families:
                for p in ((adaptive,) if adaptive else ()) + fixed:
                    if p in cells:
                        lines.append(f"| `{p}` {_cell(cells[p])}")
                present = [cells[p] | {"policy": p} for p in fixed if p in cells]
                if not adaptive or adaptive not in cells or not present:
                    continue
                a, best = cells[adaptive], min(present, key=_key)

                def fmt(r: dict) -> str:
                    if r["stopped"]:
                        return "stopped | - | -"
                    return f"{r['tpot_p50_ms']:.1f} | {r['ttft_p99_s']:.2f} | {r['tbt_p99_ms']:.1f}"

                summary.append(
                    f"| {slots} | {load:g} | `{adaptive}` | {fmt(a)} | `{best['policy']}` "
                    f"| {fmt(best)} |"
                )
            lines.append("")
    return [*lines, "Adaptive against its own best fixed width (same catalog):", "", *summary]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="widths")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", default="/tmp/widths.json")
    parser.add_argument("--rows", default=f"{ROWS[0]}:{ROWS[1]}")
    args = parser.parse_args(argv)
    started = time.time()
    a, b = (int(x) for x in args.rows.split(":"))
    todo = jobs((a, b))
    data: dict = {}
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(run_cell, todo))
    else:
        results = [run_cell(j) for j in todo]
    for slots, load, policy, cell in results:
        cell = {k: (None if isinstance(v, float) and math.isinf(v) else v) for k, v in cell.items()}
        data.setdefault(str(slots), {}).setdefault(str(load), {})[policy] = cell
    data["seconds"] = round(time.time() - started)
    Path(args.out).write_text(json.dumps(data, indent=1) + "\n")
    for line in fixed_width_section(load_widths(Path(args.out))):
        print(line)
    print(f"\n{len(todo)} runs in {data['seconds']} s; wrote {args.out}")
    return 0


def load_widths(path: Path) -> dict:
    """The results file, with a stopped run's missing percentiles as infinity."""
    data = json.loads(path.read_text())
    for loads in data.values():
        if not isinstance(loads, dict):
            continue
        for cells in loads.values():
            for cell in cells.values():
                for k, v in cell.items():
                    if v is None:
                        cell[k] = math.inf
    return data


if __name__ == "__main__":
    raise SystemExit(main())
