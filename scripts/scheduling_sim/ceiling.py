"""The decode-throughput ceiling of the capacity study's device, per slot count and build
envelope R (``ignition/simulate/bounds.py``), in tokens per ms and in load units.

    python -m scripts.scheduling_sim.ceiling

One load unit of the study's window (conv.csv rows 2000-2599) asks for about 1274 output
tokens per second; a policy whose capacity is near ceiling x (1 + what the 10 s TTFT
guard lets a backlog absorb) cannot be beaten by much at SLOs that bound TTFT only.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ignition.simulate.bounds import throughput_ceiling
from ignition.simulate.command import TraceSpec, trace_workload
from ignition.simulate.devices import H200Roofline
from ignition.simulate.workloads import DEFAULT_ACCEPTANCE
from ignition.simulate import traces

TRACE = str(traces.CONV)
CASES = ((4, 6), (4, 8), (4, None), (32, 128), (32, 192), (32, None))


def ceiling_lines(rows: tuple[int, int] = (2000, 2600)) -> list[str]:
    base = trace_workload(TraceSpec(TRACE, rows[0], rows[1] - rows[0]))(1.0)
    span_ms = max(r.arrival_ms for r in base) - min(r.arrival_ms for r in base)
    per_load = sum(r.output_tokens for r in base) / span_ms  # output tokens per ms
    device = H200Roofline()
    lines = [
        "| slots | R | prompt chunk per frame | best frame | T | tokens/ms | load units |",
        "|---|---|---|---|---|---|---|",
    ]
    for slots, envelope in CASES:
        for prompt in (0, 512):
            c = throughput_ceiling(
                device, slots, DEFAULT_ACCEPTANCE, envelope=envelope, prompt_tokens=prompt
            )
            lines.append(
                f"| {slots} | {envelope or 'unbounded'} | {prompt} | B = {c.batch}, "
                f"W = {c.width} | {c.duration_ms:.1f} ms | {c.tokens_per_ms:.3f} | "
                f"{c.tokens_per_ms / per_load:.3f} |"
            )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    argparse.ArgumentParser(prog="ceiling").parse_args(argv)
    print("\n".join(ceiling_lines()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
