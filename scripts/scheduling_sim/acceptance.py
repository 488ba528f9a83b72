"""What Helios believes about acceptance, depth by depth, against the simulator's truth.

    python -m scripts.scheduling_sim.acceptance --slots 32 --load 1.0 \\
        --policies helios,helios+step8 [--every-s 20]

Adaptive width is chosen from each request's prefix-survival estimates s_d (the
probability that the first d drafts all survive), which start at the population prior
(0.5^d, moving 1/64 toward each observation) and learn only from depths a round
offered. For each policy at one load this prints, per depth d and per stretch of
simulated time: the true s_d of the workload, the population prior, the mean estimate of
the live decoders, and how many acceptance observations that depth received (rounds that
offered at least d drafts). A depth whose estimate stays below its truth is a depth
Helios rarely offers, and a depth it rarely offers keeps its pessimistic estimate:
the feedback loop that moves the width choice. Numbers are simulated, not measured.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field

from ignition.helios.plans import LaneRole
from ignition.simulate import traces
from ignition.simulate.command import TraceSpec, trace_workload
from ignition.simulate.harness import Setup, helios_simulation, true_survivals
from ignition.simulate import traces
from ignition.simulate.sim import Simulation
from ignition.simulate.sim_state import NS_PER_MS

TRACE = str(traces.CONV)
ENVELOPE = {4: 6, 32: 128}


@dataclass
class Stretch:
    """One stretch of simulated time: estimates sampled at its end, observations during."""

    end_s: float
    prior: list[float] = field(default_factory=list)
    live: list[float] = field(default_factory=list)
    observations: list[int] = field(default_factory=list)
    rounds: int = 0
    rows: int = 0


class Watcher:
    """Wraps one Simulation's completion step; samples estimates every ``every_s``."""

    def __init__(self, sim: Simulation, depth: int, every_s: float) -> None:
        self.sim, self.depth, self.every_ns = sim, depth, round(every_s * 1e9)
        self.stretches = [Stretch(every_s)]
        self._complete = sim._complete
        sim._complete = self._on_complete  # type: ignore[method-assign]

    def _on_complete(self, run, now: int) -> None:
        current = self.stretches[-1]
        if not current.observations:
            current.observations = [0] * self.depth
        d = run.plan.descriptor
        if d.speculation_enabled and d.proposal_depth > 0:
            for lane in run.plan.lanes:
                if lane.role is LaneRole.PROMPT:
                    continue
                current.rounds += 1
                current.rows += lane.query_length
                for k in range(min(self.depth, lane.query_length - 1)):
                    current.observations[k] += 1
        self._complete(run, now)
        if now >= round(current.end_s * 1e9):
            self._sample(current)
            self.stretches.append(Stretch(current.end_s + self.every_ns / 1e9))

    def _sample(self, stretch: Stretch) -> None:
        scheduler = self.sim.scheduler
        stretch.prior = [scheduler._acceptance_prior.mean(k) for k in range(1, self.depth + 1)]
        live = [
            r.acceptance.history(r.spec.proposal_source).survivals(self.depth)
            for r in scheduler.requests.values()
            if r.is_decoder and not r.is_finished
        ]
        stretch.live = [
            sum(s[k] for s in live) / len(live) if live else float("nan") for k in range(self.depth)
        ]

    def finish(self, end_ns: int) -> list[Stretch]:
        last = self.stretches[-1]
        if last.rounds:
            last.end_s = end_ns / 1e9
            self._sample(last)
        else:
            self.stretches.pop()
        return self.stretches


def watch(policy: str, load: float, slots: int, rows: tuple[int, int], every_s: float):
    workload = trace_workload(TraceSpec(TRACE, rows[0], rows[1] - rows[0]))
    setup = Setup(slots=slots, speculative_token_capacity=ENVELOPE.get(slots, 128))
    requests = workload(load)
    sim = helios_simulation(requests, setup, policy)
    depth = max((d.proposal_depth for d in sim.scheduler.descriptors), default=0)
    watcher = Watcher(sim, depth, every_s)
    end_ns = sim._loop()
    truth = list(true_survivals(requests[0].acceptance))[:depth]
    truth += [0.0] * (depth - len(truth))
    return truth, watcher.finish(end_ns), sim.output_tokens / max(1e-9, end_ns / NS_PER_MS)


def table(truth: list[float], stretches: list[Stretch]) -> list[str]:
    depth = len(truth)
    head = " ".join(f"{'d' + str(k + 1):>17}" for k in range(depth))
    lines = [
        f"  {'until':>6} {'rows':>5} {head}",
        f"  {'truth':>6} {'':>5} " + " ".join(f"{s:>17.3f}" for s in truth),
        "  (each depth: population prior / mean live estimate / observations)",
    ]
    for st in stretches:
        cells = " ".join(
            f"{st.prior[k]:>5.3f}/{st.live[k]:>5.3f}/{st.observations[k]:>5}" for k in range(depth)
        )
        lines.append(f"  {st.end_s:>5.0f}s {st.rows / max(1, st.rounds):>5.2f} {cells}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="acceptance")
    parser.add_argument("--slots", type=int, default=32)
    parser.add_argument("--load", type=float, default=1.0)
    parser.add_argument("--rows", default="2000:2600")
    parser.add_argument("--policies", default="helios,helios+step8")
    parser.add_argument("--every-s", type=float, default=20.0)
    args = parser.parse_args(argv)
    a, b = (int(x) for x in args.rows.split(":"))
    for policy in args.policies.split(","):
        truth, stretches, rate = watch(policy, args.load, args.slots, (a, b), args.every_s)
        print(
            f"{policy} at load {args.load:g}, {args.slots} slots: output {rate * 1e3:.0f} tok/s; "
            "rows = mean target rows per speculative decoder round"
        )
        for line in table(truth, stretches):
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
