"""When copy drafts pay (issue 28): Helios's capacity on an editing workload with the MTP
head's drafts only, copies only, and both (Helios choosing every round's source).

    python -m scripts.scheduling_sim.copy_sources [--slots 32] [--heads code,chat]
        [--methods mtp,ngram,both] [--rows 2000:2600] [--jobs 2]

The study's workload and device (the Azure conversation trace's rows 2000:2600, one
H200, the qwen38 recipe's catalog at ``--slots``), every request an edit
(``acceptance.TASKS["edit"]``): a round finds a copy of the context 74% of the time,
93% right at its first position. What the MTP head's drafts are worth on the same
requests is the open question, so it is a column: ``code`` (the released head on code,
~0.9 per position) and ``chat`` (76% falling to 24% over eight positions). Each row is
a quick-mode capacity search (``capacity_study --quick``'s resolution: within about
4.4%) at the study's SLO (p99 TTFT 10 s) and at p99 TBT 100 ms / TTFT 5 s, and the run
at half load: output tokens per decode lane-frame, and the share of the rounds that
verified drafts which were given copies ("copy share").
Simulated, not measured.
"""

from __future__ import annotations

import argparse
import random
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace

from ignition.helios import HEAD_DRAFTS
from ignition.simulate.acceptance import COPIES, TASKS
from ignition.simulate.command import parse_rows, rate_scaled
from ignition.simulate.harness import Setup, run_policy
from ignition.simulate.metrics import measure
from ignition.simulate.search import SLO, search
from ignition.simulate.workloads import SimRequest, load_trace, with_tasks
from scripts.scheduling_sim.capacity_study import QUICK, TRACE

METHODS = {  # (proposal_source, proposal_choices)
    "mtp": (HEAD_DRAFTS, ()),
    "ngram": (COPIES, ()),
    "both": (HEAD_DRAFTS, (HEAD_DRAFTS, COPIES)),
}
SLOS = (SLO(None, 10_000.0), SLO(100.0, 5_000.0))
HALF_LOAD = 0.5


@dataclass(frozen=True)
class Cell:
    head: str
    method: str
    slots: int
    rows: tuple[int, int]


def edits(cell: Cell, seed: int = 0) -> list[SimRequest]:
    """The trace's requests as edits, the MTP head's acceptance drawn from ``cell.head``
    (one seed for every method, so each method serves the same requests)."""
    start, count = cell.rows
    base = with_tasks(load_trace(TRACE, start=start, count=count), {"edit": 1.0}, seed)
    head, rng = TASKS[cell.head], random.Random(seed + 1)
    source, choices = METHODS[cell.method]
    return [
        replace(r, acceptance=head.draw(rng), proposal_source=source, proposal_choices=choices)
        for r in base
    ]


def run_cell(cell: Cell) -> tuple[Cell, list[float], dict[str, float]]:
    """(cell, capacity per SLO, the half-load run's tokens per round and copy share)."""
    at = rate_scaled(edits(cell))
    setup = Setup(slots=cell.slots, helios_report=True)
    capacities, _ = search(
        ["helios"],
        SLOS,
        at,
        setup,
        lo=0.25,
        hi=4.0,
        factor=QUICK.factor,
        bisections=QUICK.bisections,
    )
    half = run_policy("helios", at(HALF_LOAD), setup)
    return cell, [c.rate for c in capacities], _rounds(half.info["report"], measure(half))


def _rounds(report: dict, metrics) -> dict[str, float]:
    """Tokens per decode lane-frame, the share of draft-verifying rounds given copies and
    the run's p50 TPOT (``sim_report.report``'s "speculation" counts)."""
    counts = report["speculation"]
    every = counts.get("all", {"frames": 0, "tokens": 0})
    rounds = sum(v["frames"] for k, v in counts.items() if k != "all")
    return {
        "tokens": every["tokens"] / max(1, every["frames"]),
        "copies": counts.get("ngram", {"frames": 0})["frames"] / max(1, rounds),
        "tpot": metrics.tpot_ms.p50,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, default=32)
    parser.add_argument("--heads", default="code,chat")
    parser.add_argument("--rows", default="2000:2600")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    rows = parse_rows(args.rows)
    methods = args.methods.split(",")
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        parser.error(f"--methods {args.methods!r}: unknown {unknown} (known: {', '.join(METHODS)})")
    cells = [Cell(h, m, args.slots, rows) for h in args.heads.split(",") for m in methods]
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(run_cell, cells))
    print(
        f"Edits on the conversation trace (rows {args.rows}), {args.slots} slots, one H200; "
        "capacity in load units (quick mode, within ~4.4%), the run at half load"
    )
    print(
        f"| MTP head on edits | method | capacity, {SLOS[0].label} | vs mtp | "
        f"capacity, {SLOS[1].label} | vs mtp | tokens / decode frame | copy share "
        "| p50 TPOT ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    base: dict[str, list[float]] = {}
    for cell, caps, half in results:
        if cell.method == "mtp":
            base[cell.head] = caps
        ref = base.get(cell.head, caps)
        ratios = [f"{c / r:.2f}x" if r > 0 else "-" for c, r in zip(caps, ref, strict=True)]
        print(
            f"| {cell.head} | {cell.method} | {caps[0]:.3f} | {ratios[0]} | {caps[1]:.3f} | "
            f"{ratios[1]} | {half['tokens']:.2f} | {half['copies']:.2f} | {half['tpot']:.1f} |"
        )


if __name__ == "__main__":
    main()
