"""The candidates of Helios decisions where a prompt frame leaves ready decoders out.

    python -m scripts.scheduling_sim.decisions --policy helios+keep-left-out \
        --concurrency 64 --after-ms 30000 --count 3

Runs the random-token benchmark of ``realworld.py`` (4x H100 profile) and, at each
decision that selects a prefill or mixed frame serving at least ``--left-out`` fewer
decoders than are ready, prints the best candidates of the exhaustive selector
(``policy.all_candidates``): duration, value, lanes and score. This is the instrument
behind ``docs/scheduling.md``, "Decoders left out of prompt frames".
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ignition.components.program_kinds import GraphKind
from ignition.helios import scheduler as helios_scheduler
from ignition.helios.decide.selector import Exhaustive
from scripts.scheduling_sim.random_mix import frame_mix

PROMPT_KINDS = (GraphKind.MIXED, GraphKind.PREFILL)


def watch(after_ms: float, count: int, left_out: int, shown: int = 6) -> None:
    """Wraps ``Scheduler.plan`` to print the decisions described above."""
    plan = helios_scheduler.Scheduler.plan
    printed = [0]

    def watched(self: helios_scheduler.Scheduler):
        winner = plan(self)
        if winner is None or winner.descriptor.kind not in PROMPT_KINDS:
            return winner
        if printed[0] >= count or self.now_ns < after_ms * 1e6:
            return winner
        evaluation = Exhaustive().evaluate(self.selection_state())
        population = evaluation.population
        ready = sum(1 for v in population.decoders if v.remaining_output >= 1)
        served = sum(1 for lane in winner.lanes if lane.role.value == "decode")
        if ready - served < left_out:
            return winner
        printed[0] += 1
        found = evaluation.inference
        print(
            f"t = {self.now_ns / 1e6:.0f} ms: {winner.descriptor.name} serves {served} of "
            f"{ready} ready decoders"
        )
        for c in sorted(found, key=lambda c: -c.score)[:shown]:
            print(
                f"  {c.descriptor.name:34s} T {c.duration_ms:6.1f} ms  value {c.total_value:9.4g}"
                f"  lanes {c.num_lanes:3d}  score {c.score:8.4g}"
            )
        return winner

    helios_scheduler.Scheduler.plan = watched


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default="helios+keep-left-out")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--after-ms", type=float, default=30_000.0)
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--left-out", type=int, default=8, help="decoders left out at least")
    args = parser.parse_args(argv)
    watch(args.after_ms, args.count, args.left_out)
    print("\n".join(frame_mix(args.policy, args.concurrency, "qwen38-flash-next-4xh100")[:1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
