"""``ignition simulate --scenario FILE.yaml``: a scenario file's requests on the harness,
every policy through ``harness.run_policy`` (docs/simulate.md, "scenario_command.py")."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from ignition.simulate.baselines import HELIOS, describe, parse_policy
from ignition.simulate.harness import run_policy, scenario_setup
from ignition.simulate.metrics import measure
from ignition.simulate.scenario import load_scenario
from ignition.simulate.sim_report import format_summary
from ignition.simulate.tables import device_table, metrics_table


def scenario_policies(declared: Sequence[str], extra: Sequence[str]) -> list[str]:
    """The scenario's policies, then ``--compare``'s not already there."""
    return list(dict.fromkeys([*declared, *extra]))


def execute(
    *,
    path: str,
    compare: Sequence[str] = (),
    as_json: bool,
    echo: Callable[[Any], None],
) -> dict[str, Any]:
    """Runs every policy of the scenario; prints and returns the report. Raises
    ScenarioError (one line naming the key) for a malformed file."""
    scenario = load_scenario(path)
    names = scenario_policies(scenario.policies, compare)
    setup = scenario_setup(scenario)
    runs = {name: run_policy(name, scenario.requests, setup) for name in names}
    metrics = {name: measure(run) for name, run in runs.items()}
    helios = next((n for n in names if parse_policy(n).family == HELIOS), None)
    report: dict[str, Any] = dict(runs[helios].info["report"]) if helios else {}
    report["policies"] = {n: describe(n) for n in names}
    report["results"] = [m.to_json() for m in metrics.values()]
    if as_json:
        echo(json.dumps(report, indent=2))
        return report
    if helios:
        echo(format_summary(report))
    rows = [("scenario", m) for m in metrics.values()]
    title = f"{path}, {setup.slots} slots, device {setup.device.name}, end {setup.end_ms:g} ms"
    echo(metrics_table(rows, f"Latency (ms unless marked): {title}"))
    echo(device_table(rows, "Device time"))
    return report
