"""``ignition simulate``: the CLI delegates here (``main``) for every workload; the
scenario and multi-turn paths are ``scenario_command.py`` and
``retention_command.py``.

On a trace (``--trace FILE``), three modes share one setup (slots, speculative token
capacity, device, acceptance):

- ``--rate X``: every policy at one load; a table of tokens/s and latency percentiles;
- ``--sweep X,Y,...``: every policy at each load (latency-vs-load curves);
- ``--capacity``: the SLO capacity search for each ``--slo TBT_MS:TTFT_S`` pair, with
  each policy's ratio to Helios.

``--json`` prints the same numbers as JSON; ``--plot DIR`` writes PNGs (matplotlib).
Bad input (a trace without a column, a nonpositive rate, an unknown policy, a
malformed SLO) is one line naming it.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ignition.helios.config import PolicyConfig
from ignition.simulate.acceptance import AcceptanceError, confidence_noise, parse_mix
from ignition.simulate.baselines import HELIOS, PolicyError, describe, parse_policy
from ignition.simulate.devices import DeviceError
from ignition.simulate.harness import Setup, run_policy
from ignition.simulate.metrics import Metrics, measure
from ignition.simulate.ple_charge import device_with_ple
from ignition.simulate.plots import PlotError, require_matplotlib, write_plots
from ignition.simulate.results import RunResult
from ignition.simulate.search import SLO, Capacity, SearchError, parse_slos, search
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


def _ms(x: float) -> str:
    if math.isinf(x):
        return "inf"
    if math.isnan(x):
        return "-"
    return f"{x / 1e3:.2f} s" if x >= 1000 else f"{x:.1f}"


def metrics_table(rows: Sequence[tuple[str, Metrics]], title: str):
    from rich.table import Table

    table = Table(title=title)
    for column in (
        "policy",
        "load",
        "out tok/s",
        "TTFT p50",
        "p90",
        "p99",
        "TBT p50",
        "p90",
        "p99",
        "TPOT p50",
        "p99",
    ):
        table.add_column(column, justify="left" if column in ("policy",) else "right")
    for load, m in rows:
        table.add_row(
            m.policy + (" (stopped)" if m.aborted else ""),
            load,
            f"{m.output_tokens_per_s:.0f}",
            *(_ms(v) for v in (m.ttft_ms.p50, m.ttft_ms.p90, m.ttft_ms.p99)),
            *(_ms(v) for v in (m.tbt_ms.p50, m.tbt_ms.p90, m.tbt_ms.p99)),
            _ms(m.tpot_ms.p50),
            _ms(m.tpot_ms.p99),
        )
    return table


def device_table(rows: Sequence[tuple[str, Metrics]], title: str):
    """Device seconds per graph kind and per execution class."""
    from rich.table import Table

    kinds = sorted({k for _, m in rows for k in m.device_ms_by_kind})
    classes = sorted({k for _, m in rows for k in m.device_ms_by_class})
    table = Table(title=title)
    table.add_column("policy")
    table.add_column("load", justify="right")
    for k in kinds:
        table.add_column(f"{k} s", justify="right")
    for k in classes:
        table.add_column(f"class {k} s", justify="right")
    for load, m in rows:
        table.add_row(
            m.policy,
            load,
            *(f"{m.device_ms_by_kind.get(k, 0.0) / 1e3:.1f}" for k in kinds),
            *(f"{m.device_ms_by_class.get(k, 0.0) / 1e3:.1f}" for k in classes),
        )
    return table


def capacity_table(capacities: Sequence[Capacity], slos: Sequence[SLO], title: str):
    from rich.table import Table

    table = Table(title=title)
    table.add_column("policy")
    for slo in slos:
        table.add_column(slo.label, justify="right")
        table.add_column("Helios ratio", justify="right")
    by = {(c.policy, c.slo): c.rate for c in capacities}
    for policy in dict.fromkeys(c.policy for c in capacities):
        cells = []
        for slo in slos:
            rate, helios = by[(policy, slo)], by.get((HELIOS, slo))
            cells.append(f"{rate:.3f}")
            cells.append("-" if helios is None or rate == 0 else f"{helios / rate:.2f}x")
        table.add_row(policy, *cells)
    return table


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


DEFAULT_COMPARE = "vllm,vllm-k3,sarathi"  # the trace path's baselines when --compare is not given


def main(
    *,
    trace: str | None = None,
    rows: str = "0:600",
    rate: float | None = None,
    sweep: str | None = None,
    capacity: bool = False,
    slo: str = "60:2,100:5,200:10",
    compare: str | None = None,
    slots: int = 32,
    envelope: int = 128,
    device: str = "h200",
    acceptance: str = "0.8,0.7,0.6,0.5,0.4",
    max_prompt: int | None = None,
    max_output: int | None = None,
    seed: int = 0,
    as_json: bool = False,
    plot_dir: str | None = None,
    tasks: str | None = None,
    confidence: str = "perfect",
    scenario: str | None = None,
    conversations: int | None = None,
    turns: int = 4,
    snapshot_rows: str = "0,4,16",
    conversation_rate: float = 4.0,
    first_prompt: int = 1024,
    turn_prompt: int = 128,
    turn_output: int = 64,
    think_ms: float = 1000.0,
    scheduler_first_delivery: float | None = None,
    scheduler_checkpoint_payoff: bool = True,
) -> int:
    """``ignition simulate``: one runner for its three workloads (``--conversations``,
    ``--scenario``, ``--trace``, in that order of precedence), every policy through the
    harness; returns the exit status. Bad input is one line on stderr naming it."""
    import sys

    from rich.console import Console

    from ignition.simulate.scenario import ScenarioError

    console = Console() if sys.stdout.isatty() else Console(width=170)

    def echo(item: Any) -> None:
        if as_json:
            print(item)
        elif isinstance(item, str):
            console.print(item, markup=False, highlight=False)
        else:
            console.print(item)

    try:
        if conversations is not None:
            from ignition.simulate import retention_command
            from ignition.simulate.multiturn import MultiTurnSpec, parse_rows_list

            spec = MultiTurnSpec(
                conversations=conversations,
                turns=turns,
                rate_per_s=conversation_rate,
                first_prompt=first_prompt,
                turn_prompt=turn_prompt,
                output_tokens=turn_output,
                think_ms=think_ms,
                seed=seed,
            )
            policy = PolicyConfig()
            if scheduler_first_delivery is not None:
                policy = replace(policy, first_delivery=scheduler_first_delivery)
            retention_command.execute(
                spec=spec,
                snapshot_rows=parse_rows_list(snapshot_rows),
                setup=Setup(
                    slots=slots,
                    speculative_token_capacity=envelope,
                    device=device_with_ple(device),
                    seed=seed,
                    noise_sigma=0.0,  # the multi-turn worker times frames without noise
                    helios_policy=policy,
                ),
                policies=policy_list(compare or ""),
                payoff=scheduler_checkpoint_payoff,
                as_json=as_json,
                echo=echo,
            )
            return 0
        if scenario is not None:
            from ignition.simulate import scenario_command

            scenario_command.execute(
                path=scenario,
                compare=policy_list(compare or "", with_helios=False),
                as_json=as_json,
                echo=echo,
            )
            return 0
        if trace is None:
            raise CommandError("give --scenario FILE, --trace FILE or --conversations N")
        if rate is not None and (not math.isfinite(rate) or rate <= 0):
            raise CommandError(f"--rate = {rate:g}: must be a positive load scale")
        start, count = parse_rows(rows)
        spec = TraceSpec(
            trace,
            start,
            count,
            max_prompt,
            max_output,
            AcceptanceModel.parse(acceptance),
            seed,
            tasks,
        )
        setup = Setup(
            slots=slots,
            speculative_token_capacity=envelope,
            device=device_with_ple(device),  # h200+ple:disk charges PLE delivery
            seed=seed,
            confidence_noise=confidence_noise(confidence),
        )
        execute(
            spec=spec,
            setup=setup,
            policies=compare or DEFAULT_COMPARE,
            rate=rate,
            sweep=sweep,
            capacity=capacity,
            slos=slo,
            as_json=as_json,
            plot_dir=plot_dir,
            echo=echo,
            show_progress=sys.stderr.isatty(),
        )
    except (*ERRORS, CommandError, ScenarioError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # a setup the catalog rules reject (slots, R)
        from ignition.components.capacity import CapacityError
        from ignition.helios.types import SchedulerError

        if isinstance(err, (CapacityError, SchedulerError)):
            print(f"error: {err}", file=sys.stderr)
            return 2
        raise
    return 0
