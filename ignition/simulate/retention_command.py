"""``ignition simulate --conversations N ...``: one table row per ``--snapshot-rows``
count (0 is off) and per ``--compare`` baseline on the same conversations, all through
``harness.run_conversations`` (docs/simulate.md, "retention_command.py")."""

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
