"""A simulated minute with costs that go stale: refresh episodes and acceptance probes
happen, the per-class totals satisfy both bounds, and ``ignition simulate --json``
reports time and episodes per execution class."""

from __future__ import annotations

import json

import yaml

try:  # issue 12 moves the simulator out of Helios into ignition.simulate
    from ignition.simulate.scenario import scenario_from_dict
    from ignition.simulate.sim import simulate
except ImportError:
    from ignition.simulate.scenario import scenario_from_dict
    from ignition.simulate.sim import simulate

CLASSES = {"ordinary", "discovery", "timing_refresh", "acceptance_learning"}
FLOOR = {"base_ms": 4.0, "per_row_ms": 0.5, "per_token_ms": 0.2, "per_draft_ms": 0.5}


def stale_minute() -> dict:
    """Eight streams whose histories wrongly say drafts fail; when they finish, two new
    ones arrive at 30 s and decode alone until the minute ends, so the shapes the first
    eight used (batch-8 rounds, the long prefill) stop being observed and go stale."""
    pessimistic = [0.05, 0.0, 0.0]
    return {
        "catalog": {
            "grid": {
                "prefill": {"token_capacity": [64, 256]},
                "decode": {"batch_capacity": [1, 2, 4, 8]},
                "speculative": {
                    "batch_capacity": [1, 2, 4, 8],
                    "token_capacity": [2, 3, 4],
                    "max_packed": 32,
                },
            }
        },
        "durations": {"formula": {k: FLOOR for k in ("prefill", "decode", "speculative")}},
        "requests": [
            {
                "count": 8,
                "arrival_ms": 0,
                "prompt_tokens": 256,
                "output_tokens": 3000,
                "acceptance": [0.9, 0.9, 0.9],
                "acceptance_prior": pessimistic,
            },
            {
                "count": 2,
                "arrival_ms": 30_000,
                "prompt_tokens": 64,
                "output_tokens": 30_000,
                "acceptance": [0.6, 0.5, 0.4],
                "acceptance_prior": pessimistic,
            },
        ],
        "preseed_costs": True,
        "seed": 3,
        "end_ms": 60_000,
    }


def test_a_simulated_minute_with_stale_costs_shows_refresh_episodes_and_probes():
    report = simulate(scenario_from_dict(stale_minute()))
    assert report["totals"]["end_ms"] >= 60_000
    totals = report["execution"]
    assert set(totals) == CLASSES
    ordinary = totals["ordinary"]["nanoseconds"]
    refresh, learning = totals["timing_refresh"], totals["acceptance_learning"]
    assert refresh["episodes"] > 0 and learning["episodes"] > 0
    assert refresh["nanoseconds"] <= 0.002 / 0.998 * ordinary + refresh["last_episode_ns"]
    assert learning["nanoseconds"] <= 0.01 / 0.99 * ordinary + learning["last_episode_ns"]
    classes = {entry["execution_class"] for entry in report["trace"]}
    assert {"timing_refresh", "acceptance_learning"} <= classes
    spent = [e["credit_spent_ns"] for e in report["trace"] if e["execution_class"] != "ordinary"]
    assert spent and all(ns > 0 for ns in spent)


def test_simulate_json_reports_time_and_episodes_per_execution_class(tmp_path, capsys):
    data = stale_minute()
    data["end_ms"] = 200
    path = tmp_path / "short.yaml"
    path.write_text(yaml.safe_dump(data))
    from ignition.simulate.options import SimulateOptions
    from ignition.simulate.runner import run

    assert run(SimulateOptions(scenario=str(path), as_json=True)) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["execution"]) == CLASSES
    for totals in report["execution"].values():
        assert set(totals) == {"executions", "nanoseconds", "episodes", "last_episode_ns"}
    assert report["execution"]["ordinary"]["executions"] > 0
