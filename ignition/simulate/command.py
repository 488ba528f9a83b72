"""``ignition simulate --trace FILE ...``: compare policies on a trace at one load
(``--rate``), a sweep (``--sweep``) or an SLO capacity search (``--capacity``); bad input
is one line naming it (docs/simulate.md, "command.py")."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ignition.simulate.acceptance import AcceptanceError, parse_mix
from ignition.simulate.baselines import HELIOS, PolicyError, describe, parse_policy
from ignition.simulate.devices import DeviceError
from ignition.simulate.harness import Setup, run_policy
from ignition.simulate.metrics import Metrics, measure
from ignition.simulate.plots import PlotError, require_matplotlib, write_plots
from ignition.simulate.results import RunResult
from ignition.simulate.search import SearchError, parse_slos, search
from ignition.simulate.tables import capacity_table, device_table, metrics_table
from ignition.simulate.workloads import (
    AcceptanceModel,
    SimRequest,
    WorkloadError,
    load_trace,
    with_acceptance,
    with_tasks,
)

ERRORS = (WorkloadError, PolicyError, SearchError, DeviceError, PlotError, AcceptanceError)


class CommandError(ValueError):
    """A malformed command-line value; the message names the option."""


@dataclass(frozen=True)
class TraceSpec:
    path: str
    start: int = 0
    count: int = 600
    max_prompt: int | None = None
    max_output: int | None = None
    acceptance: AcceptanceModel = field(default_factory=AcceptanceModel)
    seed: int = 0
    tasks: str | None = None  # a task mix (acceptance.TRACE_MIXES name or task:weight,...)


def parse_rows(text: str) -> tuple[int, int]:
    """``START:END`` (END exclusive) trace rows, 0-based after the header."""
    start, sep, end = text.partition(":")
    try:
        a, b = int(start), int(end)
    except ValueError:
        raise CommandError(f"--rows {text!r}: expected START:END, e.g. 2000:2600") from None
    if not sep or a < 0 or b <= a:
        raise CommandError(f"--rows {text!r}: needs 0 <= START < END")
    return a, b - a


def parse_rates(text: str, option: str) -> list[float]:
    try:
        rates = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise CommandError(f"{option} {text!r}: expected comma-separated numbers") from None
    for r in rates:
        if not math.isfinite(r) or r <= 0:
            raise CommandError(f"{option} = {r:g}: must be a positive load scale")
    if not rates:
        raise CommandError(f"{option}: no rates given")
    return rates


def trace_workload(spec: TraceSpec) -> Callable[[float], list[SimRequest]]:
    """rate -> requests; the trace is read once and validated before any run."""
    base = load_trace(
        spec.path,
        start=spec.start,
        count=spec.count,
        max_prompt=spec.max_prompt,
        max_output=spec.max_output,
    )
    if spec.tasks:
        base = with_tasks(base, parse_mix(spec.tasks), spec.seed)
    else:
        base = with_acceptance(base, spec.acceptance, spec.seed)
    return rate_scaled(base)


def rate_scaled(base: Sequence[SimRequest]) -> Callable[[float], list[SimRequest]]:
    """rate -> ``base`` with every arrival time divided by the rate (the load scale the
    capacity search varies); each rate's list is built once."""

    @functools.lru_cache(maxsize=64)
    def at(rate: float) -> list[SimRequest]:
        if not math.isfinite(rate) or rate <= 0:
            raise WorkloadError(f"rate = {rate!r}: must be a positive load scale")
        from dataclasses import replace

        return [replace(r, arrival_ms=r.arrival_ms / rate) for r in base]

    return at


def policy_list(text: str, with_helios: bool = True) -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    for name in names:
        parse_policy(name)
    if with_helios and HELIOS not in names:
        names.insert(0, HELIOS)
    return names


def _progress(total: int, enabled: bool):
    from rich.progress import Progress

    progress = Progress(transient=True, disable=not enabled)
    task = progress.add_task("simulating", total=total)
    return progress, task


def run_compare(
    policies: Sequence[str],
    rates: Sequence[float],
    workload: Callable[[float], Sequence[SimRequest]],
    setup: Setup,
    show_progress: bool = True,
) -> tuple[dict[str, dict[float, Metrics]], dict[str, RunResult]]:
    """Every policy at every rate; returns metrics by policy and rate, and the runs at
    the first rate (for graph-mix timelines)."""
    out: dict[str, dict[float, Metrics]] = {p: {} for p in policies}
    first: dict[str, RunResult] = {}
    progress, task = _progress(len(policies) * len(rates), show_progress)
    with progress:
        for rate in rates:
            for policy in policies:
                progress.update(task, description=f"{policy} at load {rate:g}")
                run = run_policy(policy, workload(rate), setup)
                out[policy][rate] = measure(run)
                if rate == rates[0]:
                    first[policy] = run
                progress.advance(task)
    return out, first


def setup_json(setup: Setup, spec: TraceSpec) -> dict[str, Any]:
    return {
        "trace": spec.path,
        "rows": [spec.start, spec.start + spec.count],
        "slots": setup.slots,
        "speculative_token_capacity": setup.speculative_token_capacity,
        "device": setup.device.name,
        "acceptance": spec.tasks or list(spec.acceptance.conditional),
        "confidence_noise": setup.confidence_noise,
        "seed": setup.seed,
    }


def execute(
    *,
    spec: TraceSpec,
    setup: Setup,
    policies: str,
    rate: float | None,
    sweep: str | None,
    capacity: bool,
    slos: str,
    as_json: bool,
    plot_dir: str | None,
    echo: Callable[[Any], None],
    show_progress: bool = True,
) -> None:
    """Raises one of ``ERRORS`` or CommandError for bad input; prints results via echo."""
    names = policy_list(policies)
    workload = trace_workload(spec)
    if plot_dir:
        require_matplotlib()
    title = (
        f"{spec.path} rows {spec.start}:{spec.start + spec.count}, {setup.slots} slots, "
        f"R = {setup.speculative_token_capacity}, device {setup.device.name}"
    )
    report: dict[str, Any] = {
        "setup": setup_json(setup, spec),
        "policies": {n: describe(n) for n in names},
    }
    if capacity:
        targets = parse_slos(slos)
        progress, task = _progress(0, show_progress and not as_json)
        with progress:

            def tick(policy: str, r: float) -> None:
                progress.update(task, description=f"{policy}: ran load {r:.3f}", advance=1)

            found, runs = search(names, targets, workload, setup, on_run=tick)
        report["capacity"] = [
            {
                "policy": c.policy,
                "tbt_p99_ms": c.slo.tbt_p99_ms,
                "ttft_p99_ms": c.slo.ttft_p99_ms,
                "rate": c.rate,
            }
            for c in found
        ]
        report["runs"] = {p: {str(r): m.to_json() for r, m in by.items()} for p, by in runs.items()}
        if plot_dir:
            report["plots"] = [str(p) for p in write_plots(plot_dir, runs, [], title)]
        if as_json:
            echo(json.dumps(report, indent=2))
        else:
            echo(capacity_table(found, targets, f"SLO capacity (load units): {title}"))
        return
    if (rate is None) == (sweep is None):
        raise CommandError("give exactly one of --rate X, --sweep X,Y,... or --capacity")
    rates = parse_rates(sweep, "--sweep") if sweep else parse_rates(str(rate), "--rate")
    by_policy, first = run_compare(names, rates, workload, setup, show_progress and not as_json)
    report["results"] = [{"rate": r, **by_policy[p][r].to_json()} for r in rates for p in names]
    if plot_dir:
        report["plots"] = [
            str(p) for p in write_plots(plot_dir, by_policy, list(first.values()), title)
        ]
    if as_json:
        echo(json.dumps(report, indent=2))
        return
    rows = [(f"{r:g}", by_policy[p][r]) for r in rates for p in names]
    echo(metrics_table(rows, f"Latency (ms unless marked): {title}"))
    echo(device_table(rows, "Device time"))
