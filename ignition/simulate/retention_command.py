"""``ignition simulate --conversations N ...``: a multi-turn chat workload with checkpoint
retention at each ``--snapshot-rows`` count (0 is off), one table row per count, and
one row per ``--compare`` baseline on the same conversations.

Every Helios run serves the same conversations with the same replies (the simulated
worker emits planned tokens), so its rows differ only in what retention saves:
restored prompt tokens, the prefill they no longer need, and the later turns' time to
first token. Baselines retain nothing: they re-send and re-prefill every turn whole,
under the same closed loop (a turn is sent once the previous reply finished, or at its
planned time if later). All runs go through ``harness.run_conversations``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from ignition.simulate.baselines import HELIOS, parse_policy
from ignition.simulate.harness import Setup, run_conversations
from ignition.simulate.multiturn_turns import MultiTurnSpec
from ignition.simulate.retention_results import RetentionRun, retention_table


def conversation_runs(
    spec: MultiTurnSpec,
    snapshot_rows: Sequence[int],
    setup: Setup,
    policies: Sequence[str],
    payoff: bool = True,
) -> list[RetentionRun]:
    """Helios once per snapshot row count, every other policy once."""
    runs = []
    for name in policies:
        helios = parse_policy(name).family == HELIOS
        for rows in snapshot_rows if helios else [0]:
            runs.append(run_conversations(name, spec, setup, rows, payoff))
    return runs


def execute(
    *,
    spec: MultiTurnSpec,
    snapshot_rows: Sequence[int],
    setup: Setup,
    policies: Sequence[str],
    payoff: bool,
    as_json: bool,
    echo: Callable[[Any], None],
) -> list[RetentionRun]:
    runs = conversation_runs(spec, snapshot_rows, setup, policies, payoff)
    if as_json:
        report: dict[str, Any] = {
            "workload": spec.__dict__,
            "slots": setup.slots,
            "device": setup.device.name,
            "runs": [run.to_json() for run in runs],
        }
        echo(json.dumps(report, indent=2))
        return runs
    title = (
        f"{spec.conversations} conversations x {spec.turns} turns ({spec.first_prompt}-token "
        f"first prompt, {spec.turn_prompt}-token turns, {spec.output_tokens}-token replies, "
        f"think {spec.think_ms:g} ms), {setup.slots} slots, device {setup.device.name}; "
        "TTFT and TPOT in ms"
    )
    echo(retention_table(runs, title))
    return runs
