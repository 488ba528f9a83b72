"""The simulator drives the real Scheduler; the seed's startup traces hold on its catalog."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path

import pytest
import yaml

from ignition.simulate.options import SimulateOptions
from ignition.simulate.runner import run
from ignition.simulate.scenario import ScenarioError, load_scenario, scenario_from_dict
from ignition.simulate.sim import simulate

SCENARIOS = Path(__file__).parent / "scenarios"
STARTUP = yaml.safe_load((SCENARIOS / "startup.yaml").read_text())
KNEE = yaml.safe_load((SCENARIOS / "startup-knee.yaml").read_text())
NO_FAIRNESS = {
    "preset": "balanced",
    "token_fairness": 0.0,
    "delivery_fairness": 0.0,
    "decode_age_price": 0.0,
    "terminal_age_price": 0.0,
}


def startup(
    num_requests: int, accepted: int, preseeded: bool, base: dict = STARTUP, policy=None
) -> dict:
    data = copy.deepcopy(base)
    if policy is not None:
        data["policy"] = policy
    acceptance = [1.0] * accepted + [0.0] * (7 - accepted)
    data["requests"] = [
        {
            "count": num_requests,
            "prompt_tokens": 64,
            "output_tokens": 4000,
            "acceptance": acceptance,
            "acceptance_prior": acceptance if preseeded else [],
        }
    ]
    return simulate(scenario_from_dict(data))


def delivered_between(request: dict, start_ms: float, end_ms: float) -> int:
    return sum(n for t, n in request["deliveries"] if start_ms < t <= end_ms)


CASES = [(n, a, p) for n in (5, 16) for a in (0, 3, 7) for p in (False, True)]


def first_outputs_within_100_ms(requests: list[dict]) -> bool:
    return all(r["first_output_ms"] is not None and r["first_output_ms"] <= 100 for r in requests)


@pytest.mark.parametrize(("num_requests", "accepted", "preseeded"), CASES)
def test_startup_trace_bounds(num_requests, accepted, preseeded):
    """Each 64-token prompt delivers its first output within 100 ms, gaps stay below
    150 ms, and a hundred further rounds give every stream progress within one
    eight-token burst, on a catalog where the bounds can fail (startup-knee.yaml)."""
    report = startup(num_requests, accepted, preseeded, KNEE)
    requests = report["requests"]
    assert first_outputs_within_100_ms(requests)
    for r in requests:
        times = [t for t, _ in r["deliveries"]]
        assert max(b - a for a, b in itertools.pairwise(times)) < 150
    started = max(r["first_output_ms"] for r in requests)
    later = [e["time_ns"] / 1e6 for e in report["trace"] if e["time_ns"] / 1e6 >= started]
    assert len(later) > 100
    end = later[100]
    progress = [delivered_between(r, started, end) for r in requests]
    assert min(progress) > 0
    assert max(progress) - min(progress) <= 8


@pytest.mark.parametrize(("num_requests", "accepted", "preseeded"), [(16, 3, True), (16, 7, False)])
def test_without_fairness_or_age_the_knee_catalog_breaks_the_first_output_bound(
    num_requests, accepted, preseeded
):
    """The control for the traces above: with every fairness and age coefficient at zero
    the speculating decoders take every round and a later prompt misses its bound."""
    report = startup(num_requests, accepted, preseeded, KNEE, NO_FAIRNESS)
    assert not first_outputs_within_100_ms(report["requests"])


def test_the_report_has_requests_graphs_totals_and_the_decision_trace():
    report = startup(5, 3, False)
    json.dumps(report)
    assert {"requests", "graphs", "totals", "trace"} <= set(report)
    entry = report["trace"][0]
    for key in (
        "time_ns",
        "kind",
        "batch_capacity",
        "proposal_depth",
        "token_capacity",
        "packed_capacity",
        "prefill_capacity",
        "lanes",
        "estimated_duration_ns",
        "observation_age_ns",
        "value_rate",
        "log_scale",
        "reason",
        "exploration_credit",
    ):
        assert key in entry
    executions = sum(g["executions"] for g in report["graphs"])
    in_flight = len(report["trace"]) - executions
    assert 0 <= in_flight <= 2


def test_a_recipe_catalog_discovers_its_graphs_and_finishes_every_request():
    report = simulate(load_scenario(SCENARIOS / "h200-mixed.yaml"))
    assert all(r["finish_ms"] is not None for r in report["requests"])
    reasons = {e["reason"] for e in report["trace"]}
    assert "discovery" in reasons and "ordinary" in reasons


def test_the_command_prints_json(capsys):
    assert run(SimulateOptions(scenario=str(SCENARIOS / "startup.yaml"), as_json=True)) == 0
    assert "requests" in json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("mutate", "key"),
    [
        (lambda d: d["requests"][0].pop("prompt_tokens"), "requests[0].prompt_tokens"),
        (lambda d: d.update(colour="red"), "scenario.colour"),
        (lambda d: d["requests"][0].update(acceptance=[1.5]), "requests[0].acceptance[0]"),
        (lambda d: d["durations"]["formula"].update(decode={"slope": 1}), "formula.decode.slope"),
        (lambda d: d["catalog"]["grid"].update(vision={}), "catalog.grid.vision"),
        (lambda d: d.update(end_ms="soon"), "scenario.end_ms"),
        (lambda d: d.update(policy={"preset": "fast"}), "policy"),
    ],
)
def test_a_malformed_scenario_fails_naming_the_key(mutate, key):
    data = copy.deepcopy(STARTUP)
    mutate(data)
    with pytest.raises(ScenarioError, match=key.replace("[", r"\[").replace("]", r"\]")):
        scenario_from_dict(data)
