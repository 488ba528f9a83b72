"""Where a later turn's time to first token goes, retention off against on (issue 10b).

    python -m scripts.scheduling_sim.turn_waits --conversations 8 --turns 3 --slots 4 \\
        --first-prompt 1024 --turn-prompt 128 --snapshot-rows 0,16 [--first-delivery W] \\
        [--newcomer-rule whole-prompt] [--no-checkpoint-payoff]

Runs ``ignition simulate --conversations``'s workload (``multiturn.run_retention``) and,
for every later turn, the mean time after it was sent until it was admitted and until
the first frame holding each of its lanes was committed: ``state:restore`` /
``state:init`` (its prerequisite), ``finish`` (the chunk finishing its prompt),
``decode`` (its first decode), ``state:snapshot`` / ``state:terminal`` (captures). The
table's TTFT says how long; this says which wait. Admission and commit are timestamped
by wrapping ``RequestTable.admit`` and ``Scheduler.commit`` for the run (a diagnostic,
not a hook the runtime offers). Numbers are simulated, not measured.
"""

from __future__ import annotations

import argparse
import contextlib
from collections import defaultdict
from collections.abc import Iterator, Sequence

from ignition.helios.config import NEWCOMER_RULE_NAMES, PolicyConfig
from ignition.helios.plans import LaneRole
from ignition.helios.scheduler import Scheduler
from ignition.runtime.requests.table import RequestTable
from ignition.simulate.devices import H200Roofline
from ignition.simulate.harness import helios_catalog
from ignition.simulate.multiturn import run_retention
from ignition.simulate.multiturn_turns import MultiTurnSpec, parse_rows_list

Events = dict[tuple[int, int], dict[str, int]]


def _lane_event(lane) -> str:
    if lane.role.is_state_operation:
        return f"state:{lane.role.value}"
    if lane.role is LaneRole.PROMPT:
        return "finish" if lane.expected_output_tokens > 0 else "chunk"
    return "decode"


@contextlib.contextmanager
def recording() -> Iterator[Events]:
    """Per request (slot, generation): its send and admission times, then the commit
    time of the first frame holding each kind of its lanes."""
    events: Events = defaultdict(dict)
    admit, commit = RequestTable.admit, Scheduler.commit

    def add(table, live):
        e = events[(live.handle.slot, live.handle.generation)]
        later = int(not live.request.request_id.endswith("t0"))  # turn names end in t<k>
        e.update(sent=live.arrival_ns, admit=live.admitted_ns, later=later)
        return admit(table, live)

    def committed(scheduler, plan, fence):
        for lane in plan.lanes:
            key = _lane_event(lane)
            events[(lane.handle.slot, lane.handle.generation)].setdefault(key, scheduler.now_ns)
        return commit(scheduler, plan, fence)

    RequestTable.admit, Scheduler.commit = add, committed
    try:
        yield events
    finally:
        RequestTable.admit, Scheduler.commit = admit, commit


def later_turn_waits(events: Events) -> dict[str, tuple[float, int]]:
    """Mean ms after sending, and the count, of each event over later turns."""
    waits: dict[str, list[float]] = defaultdict(list)
    for e in events.values():
        if not e.get("later"):
            continue
        for key, t in e.items():
            if key not in ("sent", "later"):
                waits[key].append((t - e["sent"]) / 1e6)
    return {k: (sum(v) / len(v), len(v)) for k, v in waits.items()}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=8)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--conversation-rate", type=float, default=4.0)
    parser.add_argument("--first-prompt", type=int, default=1024)
    parser.add_argument("--turn-prompt", type=int, default=128)
    parser.add_argument("--turn-output", type=int, default=64)
    parser.add_argument("--think-ms", type=float, default=1000.0)
    parser.add_argument("--snapshot-rows", default="0,16")
    parser.add_argument("--first-delivery", type=float, default=0.0)
    parser.add_argument(
        "--newcomer-rule",
        default="balanced",
        choices=sorted(NEWCOMER_RULE_NAMES),
        help="the newcomer start (docs/scheduling.md); whole-prompt: the start before "
        "its bound by the prompt a request can absorb",
    )
    parser.add_argument(
        "--no-checkpoint-payoff",
        action="store_true",
        help="keep every restore and capture (runtime/retention/payoff.py off): the split "
        "before that rule",
    )
    args = parser.parse_args(argv)
    spec = MultiTurnSpec(
        conversations=args.conversations,
        turns=args.turns,
        rate_per_s=args.conversation_rate,
        first_prompt=args.first_prompt,
        turn_prompt=args.turn_prompt,
        output_tokens=args.turn_output,
        think_ms=args.think_ms,
    )
    catalog = helios_catalog("qwen38", args.slots, 128, speculation="off")
    policy = PolicyConfig(first_delivery=args.first_delivery, newcomer_rule=args.newcomer_rule)
    for rows in parse_rows_list(args.snapshot_rows):
        with recording() as events:
            run = run_retention(
                spec,
                rows,
                catalog,
                slots=args.slots,
                device=H200Roofline(),
                policy=policy,
                payoff=not args.no_checkpoint_payoff,
            )
        ttft = run.later_turn_ttft_ms
        print(f"snapshot rows {rows}: later-turn TTFT mean {sum(ttft) / max(1, len(ttft)):.1f} ms")
        for key, (mean, n) in sorted(later_turn_waits(events).items(), key=lambda x: x[1][0]):
            print(f"  {key:16s} {mean:8.1f} ms after sending  ({n} turns)")


if __name__ == "__main__":
    main()
