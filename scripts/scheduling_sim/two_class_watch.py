"""One Helios decision of the two-class workload seen from inside: what each class looks like.

    python -m scripts.scheduling_sim.two_class_watch [--profile P] [--policy helios] [--at-ms 15000]

Runs ``two_class``'s workload and, at the first generation frame planned after
``--at-ms``, prints the best candidates of the exhaustive selector (duration, value,
rows, score) and, per acceptance class, the decoders' mean learned prefix survivals
s_1..s_4, the spread of s_1 across the class, their output-token price, how many have a
speculative round in their acceptance history (observed or aged by one) and their mean
confidence forecast (what the host predicts a device-allocated program's row allocation
from): the instrument behind ``docs/scheduling.md``, "Why both classes get the same
width".
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence

from ignition.components.program_kinds import GraphKind
from ignition.helios import scheduler as helios_scheduler
from ignition.helios.decide.selector import Exhaustive
from ignition.helios.state.acceptance import INITIAL_WEIGHT
from ignition.simulate.baselines import PolicyError
from ignition.simulate.devices import DeviceError, device_from_spec
from ignition.simulate.harness import Setup, helios_simulation
from scripts.scheduling_sim.two_class import HIGH, LOW, workload

GENERATION = (GraphKind.DECODE, GraphKind.SPECULATIVE)


def class_lines(sim, scheduler, evaluation) -> list[str]:
    """Per class: mean s_1..s_4, s_1's spread, output price, decoders with own data."""
    by_class: dict[int, list] = {0: [], 1: []}
    for v in evaluation.population.decoders:
        stream = sim.by_handle.get(v.handle)
        if stream is not None:
            by_class[stream.index % 2].append(v)
    lines = []
    for parity, label in ((0, HIGH), (1, LOW)):
        views = by_class[parity]
        if not views:
            continue
        means = [statistics.fmean(v.survivals[d] for v in views) for d in range(4)]
        first = [v.survivals[0] for v in views]
        observed = 0
        for v in views:
            r = scheduler.requests[v.handle]
            observed += r.acceptance.history(r.spec.proposal_source).weight(1) != INITIAL_WEIGHT
        price = statistics.fmean(v.prices.output_token for v in views)
        forecast = [statistics.fmean(v.forecast[d] for v in views) for d in range(4)]
        lines.append(
            f"  class {label}: {len(views)} decoders, learned s_1..s_4 "
            f"{', '.join(f'{m:.2f}' for m in means)} (s_1 from {min(first):.2f} to "
            f"{max(first):.2f}), {observed} with a speculative round in their history, output price {price:.3g}, "
            f"confidence forecast {', '.join(f'{m:.2f}' for m in forecast)}"
        )
    return lines


def watch(profile: str, policy: str, at_ms: float, shown: int = 6) -> list[str]:
    """Runs the workload and returns the lines described in the module docstring."""
    setup = Setup(
        slots=32,
        speculative_token_capacity=128,
        device=device_from_spec(profile),
        end_ms=at_ms + 1_000.0,  # the decision comes within a frame or two
    )
    sim = helios_simulation(workload(128), setup, policy)
    out: list[str] = []
    plan = helios_scheduler.Scheduler.plan

    def watched(self: helios_scheduler.Scheduler):
        if out or self.now_ns < at_ms * 1e6:
            return plan(self)
        evaluation = Exhaustive().evaluate(self.selection_state())  # before plan() queues
        winner = plan(self)
        if winner is None or winner.descriptor.kind not in GENERATION:
            return winner
        out.append(
            f"t = {self.now_ns / 1e6:.0f} ms: {winner.descriptor.name} "
            f"({winner.execution_class.value})"
        )
        for c in sorted(evaluation.inference, key=lambda c: -c.score)[:shown]:
            rows = sum(lane.query_length for lane in c.lanes)
            out.append(
                f"  {c.descriptor.name:38s} T {c.duration_ms:6.1f} ms  value "
                f"{c.total_value:7.4g}  rows {rows:3d}  score {c.score:7.4g}"
            )
        out.extend(class_lines(sim, self, evaluation))
        return winner

    helios_scheduler.Scheduler.plan = watched
    try:
        sim.run()
    finally:
        helios_scheduler.Scheduler.plan = plan
    return out or [f"no generation frame planned after {at_ms} ms"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="qwen38-flash-next-h200")
    parser.add_argument("--policy", default="helios")
    parser.add_argument("--at-ms", type=float, default=15_000.0)
    args = parser.parse_args(argv)
    try:
        if not args.policy.startswith("helios"):
            raise PolicyError(f"--policy {args.policy!r}: only Helios policies can be watched")
        print("\n".join(watch(args.profile, args.policy, args.at_ms)))
    except (DeviceError, PolicyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
