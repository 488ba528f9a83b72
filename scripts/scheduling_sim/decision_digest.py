"""Digests of a fixed set of short simulations: the guard for speed work on the simulator.

    python -m scripts.scheduling_sim.decision_digest            # print one digest per case
    python -m scripts.scheduling_sim.decision_digest --save DIR # also write each run's JSON

A change meant to make the simulator or Helios's plan() faster without changing any
decision must leave every digest as it was. Each digest covers everything a run
produced: every request's deliveries and finish, every execution (times, graph, rows,
tokens, width), and for Helios its whole decision trace (each committed plan's shape,
lanes, estimated duration, value rate and log scale, exactly as floats) and execution
totals. The cases are small versions of the real-world study's workloads
(``realworld.py``) on its three profiles, a load-time variant, a few baselines and the
scenario files of ``tests/simulate/scenarios``; together about a minute on one core.
``--save`` keeps the JSON so that two runs' first difference can be found with diff.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from ignition.simulate.harness import (
    Setup,
    helios_simulation,
    run_policy,
)
from ignition.simulate.baselines import PolicyError, parse_policy
from ignition.simulate.scenario import load_scenario
from ignition.simulate.sim import Simulation
from ignition.simulate.workloads import SimRequest
from scripts.scheduling_sim.realworld import (
    Plan,
    conv_workload,
    long_prompt_workload,
    random_setup,
    random_workload,
    setup_for,
)

SCENARIOS = Path(__file__).resolve().parents[2] / "tests" / "simulate" / "scenarios"
CONV_ROWS = (2000, 2080)


def _helios_run(name: str, requests: list[SimRequest], setup: Setup) -> dict:
    """``harness.run_helios`` with the whole decision trace kept (not only its last
    4,096 entries)."""
    sim = helios_simulation(requests, setup, name)
    sim.scheduler.trace = deque()
    result = sim.run_result(name)
    return {
        "result": _result(result),
        "trace": [asdict(e) for e in sim.scheduler.trace],
        "execution": sim.scheduler.execution_totals(),
        "plans": len(sim.scheduler.trace),
    }


def baseline_run(name: str, requests: list[SimRequest], setup: Setup) -> dict:
    return {"result": _result(run_policy(name, requests, setup))}


def scenario_run(file: str) -> dict:
    sim = Simulation(load_scenario(SCENARIOS / file))
    sim.scheduler.trace = deque()
    report = sim.run()
    # the report's per-source round counts (issue 28) came after the recorded digests;
    # they follow from the decisions and draws the rest of the report holds
    report.pop("speculation", None)
    return {"report": report, "plans": len(report["trace"])}


def _request(x) -> dict:
    """A request's record; its round and row counts (issue 40's width columns) and its
    prompt-row gather (issue 39, session 17) came after the recorded digests and follow
    from the decisions and draws the rest holds."""
    out = asdict(x)
    for later in ("rounds", "verified_rows", "prompt_rows_ms"):
        out.pop(later, None)
    return out


def _result(r) -> dict:
    return {
        "requests": [_request(x) for x in r.requests],
        "executions": [asdict(x) for x in r.executions],
        "end_ms": r.end_ms,
        "aborted": r.info.get("aborted"),
    }


def cases(preset: str = "") -> dict[str, Callable[[], dict]]:
    """``preset``: run every Helios case under that preset variant (``balanced``: the
    seed's preset, whose digests are those recorded before issue 40 made ``objective``
    the default)."""
    plan = Plan(True, CONV_ROWS)

    def helios_run(name: str, requests: list[SimRequest], setup: Setup) -> dict:
        if preset:
            name = name.replace("helios", f"helios+{preset}", 1)
        return _helios_run(name, requests, setup)

    conv = conv_workload(plan)
    long_plan = Plan(True, long_decoders=30, long_prompts=4, decoder_output=300)
    h200 = setup_for("qwen38-flash-next-h200", 32, 128)
    return {
        "conv-h200-helios": lambda: helios_run("helios", conv(0.5), h200),
        "conv-4xh100-helios": lambda: helios_run(
            "helios", conv(0.5), setup_for("qwen38-flash-next-4xh100", 32, 128)
        ),
        "conv-dense-helios": lambda: helios_run(
            "helios", conv(0.5), setup_for("qwen38-27b-dense-h200", 32, 128)
        ),
        "conv-h200-helios+chunk1024": lambda: helios_run("helios+chunk1024", conv(0.5), h200),
        "conv-h200-helios+throughput": lambda: helios_run("helios+throughput", conv(0.7), h200),
        "random-c8-helios": lambda: helios_run("helios", random_workload(8), random_setup(8)),
        "random-c64-helios": lambda: helios_run(
            "helios", random_workload(64)[:96], random_setup(64)
        ),
        "long-h200-helios": lambda: helios_run(
            "helios", long_prompt_workload(long_plan, 0.5), h200
        ),
        "conv-h200-vllm-padded": lambda: baseline_run("vllm-padded", conv(0.5), h200),
        "conv-h200-vllm-adaptive-padded": lambda: baseline_run(
            "vllm-adaptive-padded", conv(0.5), h200
        ),
        "conv-h200-sarathi-padded": lambda: baseline_run("sarathi-padded", conv(0.5), h200),
        "scenario-h200-mixed": lambda: scenario_run("h200-mixed.yaml"),
        "scenario-startup": lambda: scenario_run("startup.yaml"),
    }


def digest(data: dict) -> str:
    """SHA-256 of the canonical JSON (floats as Python's shortest round-trip repr)."""
    text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save", default="", help="write each case's JSON into this folder")
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument(
        "--preset",
        default="",
        help="Helios variants the Helios cases run under, e.g. balanced (the digests "
        "recorded before issue 40) or balanced+gen-left-out (one rule at a time)",
    )
    args = parser.parse_args(argv)
    if args.preset:
        try:
            parse_policy(f"helios+{args.preset}")
        except PolicyError as err:
            parser.error(f"--preset: {err}")
    chosen = cases(args.preset)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in chosen]
        if unknown:
            parser.error(f"--only: unknown case {unknown[0]!r} (known: {', '.join(chosen)})")
        chosen = {n: chosen[n] for n in names}
    total = 0.0
    for name, run in chosen.items():
        start = time.perf_counter()
        data = run()
        seconds = time.perf_counter() - start
        total += seconds
        plans = data.pop("plans", "-")
        print(f"{name:<34} {digest(data)}  plans {plans!s:>5}  {seconds:6.2f} s", flush=True)
        if args.save:
            out = Path(args.save)
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{name}.json").write_text(json.dumps(data, indent=1, default=str))
    print(f"{'total':<34} {'':16}  {'':11}  {total:6.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
