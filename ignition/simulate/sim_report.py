"""What a scenario run reports: its JSON report and the text summary printed from it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ignition.helios import Scheduler, trace_to_json
from ignition.simulate.sim_state import NS_PER_MS, Stream


class ReportedRun(Protocol):
    """What the report reads of a ``sim.Simulation`` (which imports this module)."""

    scheduler: Scheduler
    streams: Sequence[Stream]
    graphs: dict[str, list[float]]
    prompt_tokens: int
    output_tokens: int
    speculation: dict[str, list[int]]


def report(sim: ReportedRun, end_ns: int) -> dict[str, Any]:
    """The run as ``ignition simulate --scenario``'s JSON report."""
    seconds = max(end_ns, 1) / 1e9
    statistics = sim.scheduler.statistics()
    requests = [
        {
            "id": s.index,
            "arrival_ms": s.request.arrival_ms,
            "first_output_ms": s.first_output_ms,
            "deliveries": [[round(t, 6), n] for t, n in s.deliveries],
            "finish_ms": s.finish_ms,
        }
        for s in sorted(sim.streams, key=lambda s: s.index)
    ]
    graphs = [
        {"graph": name, "executions": len(ms), "total_ms": round(sum(ms), 6)}
        for name, ms in sorted(sim.graphs.items())
    ]
    return {
        "requests": requests,
        "graphs": graphs,
        "totals": {
            "end_ms": end_ns / NS_PER_MS,
            "prompt_tokens_per_s": sim.prompt_tokens / seconds,
            "output_tokens_per_s": sim.output_tokens / seconds,
        },
        # decode lane-frames and their tokens: "all", and per source the rounds that
        # verified drafts
        "speculation": {
            k: {"frames": n, "tokens": t} for k, (n, t) in sorted(sim.speculation.items())
        },
        "execution": statistics.execution_totals,
        "trace": [trace_to_json(e) for e in statistics.trace],
    }


def format_summary(report: dict[str, Any]) -> str:
    totals = report["totals"]
    lines = [
        f"simulated {totals['end_ms']:.1f} ms: "
        f"{totals['prompt_tokens_per_s']:.0f} prompt tok/s, "
        f"{totals['output_tokens_per_s']:.0f} output tok/s"
    ]
    for g in report["graphs"]:
        lines.append(f"  {g['graph']:<40} {g['executions']:>6} runs {g['total_ms']:>10.1f} ms")
    for cls, t in report["execution"].items():
        lines.append(
            f"  {cls:<20} {t['executions']:>6} runs {t['nanoseconds'] / NS_PER_MS:>10.1f} ms "
            f"{t['episodes']:>4} episodes"
        )
    for r in report["requests"]:
        lines.append(
            f"  request {r['id']:>3}: first output {r['first_output_ms']} ms, "
            f"{len(r['deliveries'])} deliveries, finished {r['finish_ms']}"
        )
    return "\n".join(lines)
