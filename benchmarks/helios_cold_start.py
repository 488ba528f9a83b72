"""Cold start: the first frames of a fresh Helios on the runtime's catalog (a benchmark).

Nothing is measured yet (a server's first seconds: every program's estimate starts at
zero), several requests arrive at once, and each frame completes as its H200-like
formula says (scripts/scheduling_sim/plan_bench.py). Prints each frame's program, execution class
and row roles, then every request's first-token time. Issue 10 used it to see whether a
fresh request's init waits behind the exploration of programs another request fills.

    .venv/bin/python benchmarks/helios_cold_start.py [--mode adaptive] [--requests 4]
        [--prompt 200] [--frames 16]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, not an install

from ignition.components.program_kinds import GraphKind
from ignition.helios import (
    CompletionReport,
    ConfidenceSidecar,
    ExecutionTiming,
    Fence,
    RequestSpec,
    Resources,
    Scheduler,
)
from scripts.scheduling_sim.plan_bench import (
    H200_LIKE,
    MODES,
    STATE_MS,
    _completed,
    runtime_catalog,
)

STATE_KINDS = (GraphKind.INIT, GraphKind.RESTORE, GraphKind.SNAPSHOT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="adaptive", choices=MODES)
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=200)
    parser.add_argument("--output", type=int, default=50)
    parser.add_argument("--frames", type=int, default=16)
    args = parser.parse_args()
    catalog, speculation = runtime_catalog(args.mode)
    s = Scheduler(catalog, resources=Resources(num_request_slots=8), speculation=speculation)
    prior = (0.7, 0.5, 0.3, 0.2, 0.1)
    handles = [
        s.admit(RequestSpec(args.prompt, args.output, acceptance_prior=prior))
        for _ in range(args.requests)
    ]
    now, first = 0, {}
    for i in range(args.frames):
        plan = s.plan()
        if plan is None:
            print("no plan")
            break
        fence = Fence(i + 1)
        s.commit(plan, fence)
        d = plan.descriptor
        ms = STATE_MS if d.kind in STATE_KINDS else H200_LIKE[d.kind].duration_ms(d)
        now += round(ms * 1e6)
        s.advance_to(now)
        timing = ExecutionTiming(round(ms * 1e6))
        records = _completed(plan)
        if d.is_device_allocated:
            records = [replace(r, num_verified_tokens=len(r.token_ids)) for r in records]
            plane = tuple((0.5,) * d.proposal_depth for _ in range(d.batch_capacity))
            report = CompletionReport(records, timing, ConfidenceSidecar((plane, plane)))
        else:
            report = CompletionReport(records, timing)
        tokens = s.complete(fence, report)
        for t in tokens:
            first.setdefault(t.handle, now / 1e6)
            s.published_output(t.handle, fence)
        roles = ",".join(sorted({lane.role.value for lane in plan.lanes}))
        print(
            f"{i:2d} t={now / 1e6:8.2f} ms {d.name:34s} {plan.execution_class.value:12s} "
            f"rows={len(plan.lanes)} [{roles}]"
        )
    times = [f"{first[h]:.1f}" if h in first else "-" for h in handles]
    print("first tokens (ms):", " / ".join(times))


if __name__ == "__main__":
    main()
