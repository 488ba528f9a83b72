"""The capacity study of issue 12: Helios against fixed baselines on the Azure conversation
trace and the H200 timing model, at the recipe's 4 slots and at 32 slots.

    python -m scripts.scheduling_sim.capacity_study            # writes docs/capacity.md
    python -m scripts.scheduling_sim.capacity_study --jobs 2   # two processes
    python -m scripts.scheduling_sim.capacity_study --quick    # a few minutes, to iterate
    python -m scripts.scheduling_sim.capacity_study --all --jobs 2   # everything, one command
    python -m scripts.scheduling_sim.capacity_study --page     # re-render from committed files

``--all`` runs the study for both slot counts, then the what-if and padding searches
(quick mode) and the width comparison (``widths.py``), writes their files under
``docs/capacity/`` and renders the whole page from them; ``--page`` renders the same
page from the committed files without simulating.

``--quick`` ranks the policies that matter (Helios and the baselines that were best at
some SLO or are the half-load reference) on a coarser search (grid factor 2^(1/2), three
bisections: capacities within about 4.4% instead of 2%) without plots or spot checks,
and writes ``/tmp/capacity-quick.md`` unless ``--out`` says otherwise; its page says
it is quick-mode.

Regenerates every table and plot of ``docs/capacity.md`` (plots in ``docs/capacity/``).
The numbers are simulated (see ``ignition/simulate``), not measured on a GPU.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from ignition.simulate import traces
from ignition.simulate.baselines import HELIOS, describe
from ignition.simulate.command import TraceSpec, trace_workload
from ignition.simulate.harness import Setup, run_policy
from ignition.simulate.metrics import Metrics, measure, metrics_from_json
from ignition.simulate.search import BISECTIONS, GRID_FACTOR, SLO, Capacity, search
from scripts.scheduling_sim.causes import CAUSES
from scripts.scheduling_sim.ceiling import ceiling_lines
from scripts.scheduling_sim.padding import POLICIES as PADDING_POLICIES
from scripts.scheduling_sim.padding import padding_section
from scripts.scheduling_sim.widths import fixed_width_section, load_widths
from scripts.scheduling_sim.widths import main as widths_main

TRACE = str(traces.CONV)
POLICIES = (
    "helios",
    "helios+normalizer-newcomer",
    "helios+wide-mixed",
    "vllm",
    "vllm-b8192",
    "vllm-k1",
    "vllm-k2",
    "vllm-k3",
    "vllm-k5",
    "sarathi",
    "prefill-first",
)
QUICK_POLICIES = ("helios", "vllm", "vllm-k1", "vllm-k3", "vllm-k5")
FIXED_WIDTHS = ("vllm", "vllm-k1", "vllm-k2", "vllm-k3", "vllm-k5")
STUDY_SLO = SLO(None, 10_000.0)  # the table: TBT not binding, p99 TTFT under 10 s
TARGET_SLOS = (SLO(60.0, 2_000.0), SLO(100.0, 5_000.0), SLO(200.0, 10_000.0))
HALF_LOAD = 0.5
SEARCH_LO = 0.25  # the grid's first load; --lo lowers it where a policy fails even there
ENVELOPE = {4: 6, 32: 128}  # the recipe's default R at 4 slots; the 128 at 32


@dataclass(frozen=True)
class Resolution:
    """The capacity search's grid factor and bisections (quick mode: coarser)."""

    factor: float = GRID_FACTOR
    bisections: int = BISECTIONS

    @property
    def percent(self) -> float:
        return 100 * (self.factor ** (1 / 2**self.bisections) - 1)


FULL = Resolution()
QUICK = Resolution(2**0.5, 3)


@dataclass
class Job:
    slots: int
    policy: str
    rows: tuple[int, int]
    resolution: Resolution = FULL
    lo: float = SEARCH_LO  # the search's lowest load: a capacity of 0.0 means "below lo"


@dataclass
class JobResult:
    job: Job
    capacities: list[Capacity]
    runs: dict[float, Metrics]
    half: Metrics
    seconds: float


def run_job(job: Job) -> JobResult:
    start = time.time()
    spec = TraceSpec(TRACE, job.rows[0], job.rows[1] - job.rows[0])
    workload = trace_workload(spec)
    setup = Setup(slots=job.slots, speculative_token_capacity=ENVELOPE.get(job.slots, 128))
    slos = (STUDY_SLO, *TARGET_SLOS)
    res = job.resolution
    capacities, runs = search(
        [job.policy],
        slos,
        workload,
        setup,
        lo=job.lo,
        hi=4.0,
        factor=res.factor,
        bisections=res.bisections,
    )
    half = measure(run_policy(job.policy, workload(HALF_LOAD), setup))
    return JobResult(job, capacities, runs[job.policy], half, time.time() - start)


def _shown(rate: float, lo: float = SEARCH_LO) -> str:
    """A capacity for the page: 0.0 means the policy failed the SLO at the search's lowest
    load, so it reads "< lo" (a bound the search measured), not "no load at all"."""
    return f"{rate:.3f}" if rate > 0 else f"< {lo:g}"


def _lo(results: list[JobResult], slots: int, policy: str) -> float:
    return next(
        (r.job.lo for r in results if r.job.slots == slots and r.job.policy == policy), SEARCH_LO
    )


def _ratio(helios: float, other: float, helios_lo: float = SEARCH_LO) -> str:
    """Helios's capacity over another's; a Helios that failed at the search's lowest load
    reads as the bound that measured ("< lo / other"), not as 0.00x."""
    if other <= 0:
        return "-"
    if helios <= 0:
        return f"< {helios_lo / other:.2f}x"
    return f"{helios / other:.2f}x"


def capacity_section(results: list[JobResult], slots: int) -> list[str]:
    mine = [r for r in results if r.job.slots == slots]
    by = {(r.job.policy, c.slo): c.rate for r in mine for c in r.capacities}
    helios = {slo: by.get((HELIOS, slo), 0.0) for slo in (STUDY_SLO, *TARGET_SLOS)}
    helios_lo = _lo(mine, slots, HELIOS)
    lines = [
        f"### {slots} slots, R = {ENVELOPE.get(slots, 128)}",
        "",
        "Capacity (load units) with p99 TTFT under 10 s, TBT not binding (the issue's table):",
        "",
        "| policy | capacity | Helios ratio |",
        "|---|---|---|",
    ]
    for r in mine:
        rate = by[(r.job.policy, STUDY_SLO)]
        lines.append(
            f"| {describe(r.job.policy)} (`{r.job.policy}`) | {_shown(rate, r.job.lo)} | "
            f"{_ratio(helios[STUDY_SLO], rate, helios_lo)} |"
        )
    lines += [
        "",
        "Capacity at the targets' SLO pairs (p99 TBT / p99 TTFT), Helios ratio beside:",
        "",
        "| policy | " + " | ".join(f"{s.label} | ratio" for s in TARGET_SLOS) + " |",
        "|---|" + "---|---|" * len(TARGET_SLOS),
    ]
    for r in mine:
        cells = []
        for slo in TARGET_SLOS:
            rate = by[(r.job.policy, slo)]
            cells += [_shown(rate, r.job.lo), _ratio(helios[slo], rate, helios_lo)]
        lines.append(f"| `{r.job.policy}` | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"At half load ({HALF_LOAD} load units):",
        "",
        "| policy | out tok/s | TTFT p50 | TTFT p99 | TBT p50 | TBT p99 | TPOT p50 |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in mine:
        m = r.half
        lines.append(
            f"| `{r.job.policy}` | {m.output_tokens_per_s:.0f} | {m.ttft_ms.p50 / 1e3:.3f} s | "
            f"{m.ttft_ms.p99 / 1e3:.2f} s | {m.tbt_ms.p50:.1f} ms | {m.tbt_ms.p99:.1f} ms | "
            f"{m.tpot_ms.p50:.1f} ms |"
        )
    baselines = [r for r in mine if not r.job.policy.startswith(HELIOS)]
    lines += [
        "",
        "Helios against the best baseline at each SLO (fixed-K speculation included):",
        "",
        "| SLO | Helios | best baseline | its capacity | Helios ratio |",
        "|---|---|---|---|---|",
    ]
    for slo in (STUDY_SLO, *TARGET_SLOS):
        if not baselines:
            break
        best = max(baselines, key=lambda r: by[(r.job.policy, slo)])
        rate = by[(best.job.policy, slo)]
        lines.append(
            f"| {slo.label} | {_shown(helios[slo], _lo(mine, slots, HELIOS))} | "
            f"`{best.job.policy}` | {_shown(rate, best.job.lo)} | "
            f"{_ratio(helios[slo], rate, helios_lo)} |"
        )
    lines += widths_section(mine)
    lines += ["", f"![latency vs load, {slots} slots](capacity/latency_vs_load_{slots}.png)", ""]
    return lines


def strip_plots(lines: list[str]) -> list[str]:
    return [line for line in lines if not line.startswith("![")]


def widths_section(mine: list[JobResult]) -> list[str]:
    """Adaptive against fixed widths at every load all of them ran (the shared grid)."""
    runs = {r.job.policy: r.runs for r in mine}
    fixed = [p for p in FIXED_WIDTHS if p in runs]
    if HELIOS not in runs or not fixed:
        return []
    loads = sorted(set(runs[HELIOS]).intersection(*(runs[p] for p in fixed)))
    lines = [
        "",
        "Adaptive (Helios) against the best fixed width at each load (p50 TPOT, ms;"
        " p99 TTFT, s; stopped runs count as failing):",
        "",
        "| load | Helios TPOT | best fixed TPOT | Helios p99 TTFT | best fixed p99 TTFT |",
        "|---|---|---|---|---|",
    ]
    for load in loads:
        h = runs[HELIOS][load]
        best_tpot = min(fixed, key=lambda p: runs[p][load].tpot_ms.p50)
        best_ttft = min(fixed, key=lambda p: runs[p][load].ttft_ms.p99)
        lines.append(
            f"| {load:.3f} | {h.tpot_ms.p50:.1f} | {runs[best_tpot][load].tpot_ms.p50:.1f} "
            f"(`{best_tpot}`) | {h.ttft_ms.p99 / 1e3:.2f} | "
            f"{runs[best_ttft][load].ttft_ms.p99 / 1e3:.2f} (`{best_ttft}`) |"
        )
    return lines


def write_plots(results: list[JobResult], plots: Path, rows: tuple[int, int]) -> list[str]:
    try:
        import matplotlib  # noqa: F401  (the plot extra)

        from ignition.simulate.plots import graph_mix, latency_vs_load
    except ImportError:
        print("matplotlib missing (pip install -e '.[plot]'): plots left as they are")
        return []
    plots.mkdir(parents=True, exist_ok=True)
    written = []
    for slots in sorted({r.job.slots for r in results}):
        runs = {r.job.policy: r.runs for r in results if r.job.slots == slots}
        path = plots / f"latency_vs_load_{slots}.png"
        latency_vs_load(runs, path, f"conv.csv rows {rows[0]}:{rows[1]}, {slots} slots")
        written.append(str(path))
        spec = TraceSpec(TRACE, rows[0], rows[1] - rows[0])
        setup = Setup(slots=slots, speculative_token_capacity=ENVELOPE.get(slots, 128))
        for policy in ("helios", "vllm-k3"):
            run = run_policy(policy, trace_workload(spec)(HALF_LOAD), setup)
            path = plots / f"graph_mix_{policy}_{slots}.png"
            graph_mix(run, path, window_ms=20_000)
            written.append(str(path))
    return written


QUICK_NOTE = (
    "\n\n**Quick mode** (`--quick`): a coarser search and fewer policies, to rank"
    " policies while iterating; not the study of record."
)
HEADER = """# Capacity: Helios against fixed baselines (simulated)

Generated by `python -m scripts.scheduling_sim.capacity_study --all` for both slot
counts (the main study at full resolution, the what-if and padding searches in quick
mode, the width comparison; results and plots in `docs/capacity/`; do not edit by
hand), and re-rendered from those committed files by `capacity_study --page`. The
main tables below come from the last full study (`docs/capacity/results.json`), the
sections marked quick mode from quick searches. Every policy runs on the same
simulated device (the H200 roofline of `shared/spec/h200-timing-model.md`, lognormal
noise sigma 0.03), the same request slots and the same workload: the Azure
conversation trace `conv.csv`, rows {rows}, arrivals replayed at a rate scale (one
load unit is the trace's own arrival rate, about 4.9 requests/s), MTP drafts accepted
with conditional probabilities 0.8, 0.7, 0.6, 0.5, 0.4 per position. Helios runs the
qwen38 recipe's catalog built for the slot count (`--concurrency`,
`--speculative-token-capacity`, mixed programs, adaptive speculation) with measured
costs preseeded; baselines run eager batches of exactly their work (no padding).
Capacity is the highest load whose run finishes every request within the SLO: a
geometric grid (factor {factor}) then {bisections} bisections, so capacities are within
about {percent:.1f}%.{quick}

Policies: {policies}.
"""


def save_results(results: list[JobResult], path: Path) -> None:
    data = [
        {
            "slots": r.job.slots,
            "policy": r.job.policy,
            "rows": list(r.job.rows),
            "seconds": r.seconds,
            "lo": r.job.lo,
            "capacities": [
                {"tbt_p99_ms": c.slo.tbt_p99_ms, "ttft_p99_ms": c.slo.ttft_p99_ms, "rate": c.rate}
                for c in r.capacities
            ],
            "runs": {str(rate): m.to_json() for rate, m in r.runs.items()},
            "half": r.half.to_json(),
        }
        for r in results
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")


def load_results(path: Path) -> list[JobResult]:
    out = []
    for item in json.loads(path.read_text()):
        job = Job(item["slots"], item["policy"], tuple(item["rows"]), lo=item.get("lo", SEARCH_LO))
        capacities = [
            Capacity(job.policy, SLO(c["tbt_p99_ms"], c["ttft_p99_ms"]), c["rate"], None)
            for c in item["capacities"]
        ]
        runs = {float(k): metrics_from_json(v) for k, v in item["runs"].items()}
        out.append(
            JobResult(job, capacities, runs, metrics_from_json(item["half"]), item["seconds"])
        )
    return out


def _cap(results: list[JobResult], slots: int, policy: str, slo: SLO) -> float:
    for r in results:
        if r.job.slots == slots and r.job.policy == policy:
            for c in r.capacities:
                if c.slo == slo:
                    return c.rate
    return 0.0


def _half(results: list[JobResult], slots: int, policy: str) -> Metrics | None:
    for r in results:
        if r.job.slots == slots and r.job.policy == policy:
            return r.half
    return None


def findings(results: list[JobResult], slots: list[int]) -> list[str]:
    """The before/after table of the Helios variants, per slot count and SLO."""
    variants = [p for p in POLICIES if p.startswith(HELIOS)]
    lines = [
        "## Helios before and after",
        "",
        "`helios` is the current code (the balanced newcomer rule of `docs/scheduling.md`);"
        " `helios+normalizer-newcomer` the earlier rule; `helios+wide-mixed` a what-if"
        " catalog outside the seed's mixed contract (wider mixed widths also at the"
        " 2048-token prompt bucket). Capacity in load units; p50 TTFT at half load.",
        "",
        "| slots | variant | "
        + " | ".join(s.label for s in (STUDY_SLO, *TARGET_SLOS))
        + " | p50 TTFT at half load |",
        "|---|---|" + "---|" * (len(TARGET_SLOS) + 2),
    ]
    for n in slots:
        for v in variants:
            half = _half(results, n, v)
            if half is None:
                continue
            caps = " | ".join(
                _shown(_cap(results, n, v, s), _lo(results, n, v))
                for s in (STUDY_SLO, *TARGET_SLOS)
            )
            lines.append(f"| {n} | `{v}` | {caps} | {half.ttft_ms.p50 / 1e3:.3f} s |")
    return lines


SPOT_LOADS = (1.0, 1.189207)


def spot_checks(rows: tuple[int, int]) -> list[str]:
    """Acceptance learning: Helios with each request's true acceptance preseeded."""
    spec = TraceSpec(TRACE, rows[0], rows[1] - rows[0])
    workload = trace_workload(spec)
    setup = Setup(slots=32, speculative_token_capacity=128)
    lines = [
        "",
        "Acceptance learning, spot check at 32 slots (`helios+trained` preseeds each"
        " request's true prefix survivals, what perfect learning would reach):",
        "",
        "| load | variant | p99 TTFT | p50 TPOT | p99 TBT | finished |",
        "|---|---|---|---|---|---|",
    ]
    for load in SPOT_LOADS:
        for policy in ("helios", "helios+trained"):
            m = measure(run_policy(policy, workload(load), setup, STUDY_SLO.ttft_p99_ms))
            ttft = "stopped (> 10 s)" if m.aborted else f"{m.ttft_ms.p99 / 1e3:.2f} s"
            lines.append(
                f"| {load:.3f} | `{policy}` | {ttft} | {m.tpot_ms.p50:.1f} ms | "
                f"{m.tbt_ms.p99:.1f} ms | {m.finished}/{m.requests} |"
            )
    return lines


def whatif_section(results: list[JobResult], whatifs: list[JobResult]) -> list[str]:
    """Capacities of what-if variants (from a separate, usually quick-mode, results file)
    beside the best baseline of the main results at each SLO."""
    if not whatifs:
        return []
    slos = (STUDY_SLO, *TARGET_SLOS)
    lows = ", ".join(
        f"{n} slots from {lo:g}" for n, lo in sorted({(w.job.slots, w.job.lo) for w in whatifs})
    )
    lines = [
        "## What-ifs",
        "",
        "Helios variants searched separately (`--whatif-results`; the search resolution is"
        " each file's, quick mode: within about 4.4%), against the best baseline above."
        " `--all` searches them (`WHATIF_POLICIES`) into docs/capacity/whatifs.json; one by"
        " one: `python -m scripts.scheduling_sim.capacity_study --quick --slots S"
        " --policies VARIANTS --results FILE`, then merge FILE into whatifs.json and"
        " `--page`. A search starts at the load its file names (`--lo`; 0.25 unless said):"
        f" here {lows}; a capacity below it reads `< lo`:",
        "",
        "| slots | variant | " + " | ".join(s.label for s in slos) + " |",
        "|---|---|" + "---|" * len(slos),
    ]
    for w in whatifs:
        n = w.job.slots
        base = [r for r in results if r.job.slots == n and not r.job.policy.startswith(HELIOS)]
        cells = []
        for slo in slos:
            mine = next((c.rate for c in w.capacities if c.slo == slo), 0.0)
            best = max((_cap(results, n, r.job.policy, slo) for r in base), default=0.0)
            cells.append(f"{_shown(mine, w.job.lo)} ({_ratio(mine, best, w.job.lo)})")
        lines.append(f"| {n} | `{w.job.policy}` | " + " | ".join(cells) + " |")
    lines += ["", *(f"- `{w.job.policy}`: {describe(w.job.policy)}" for w in whatifs)]
    return lines


def mixed_cost_note() -> list[str]:
    """Why one prompt bucket for wider mixed widths costs Helios: roofline durations."""
    from ignition.components.program_kinds import GraphKind
    from ignition.simulate.devices import Execution, H200Roofline

    h = H200Roofline()
    context = 32 * 1400

    def mixed(prompt: int) -> float:
        n = prompt + 128
        return h.duration_ms(Execution(GraphKind.MIXED, n, 32, n, 32, context, 3))

    spec = h.duration_ms(Execution(GraphKind.SPECULATIVE, 128, 32, 128, 32, context, 3))
    return [
        "",
        "On the roofline a mixed graph of 32 decoders at width 4 costs "
        f"{mixed(512):.1f} ms with a 512-token prompt row, {mixed(2048):.1f} ms with 2048 "
        f"and {spec:.1f} ms with none (1400 cached tokens per row): every expert is read "
        "for any graph above a few dozen tokens, so prompt tokens ride almost free up to "
        "the arithmetic knee. A ~1200-token prompt (the window's mean) needs three "
        "512-token mixed frames where a vLLM-style step takes it in one.",
    ]


def targets(results: list[JobResult], slots: list[int]) -> list[str]:
    """The issue's targets, each with the measured verdict."""
    lines = [
        "## Targets",
        "",
        "| slots | SLO | Helios | best baseline | ratio | target 1.1x |",
        "|---|---|---|---|---|---|",
    ]
    for n in slots:
        base = [r for r in results if r.job.slots == n and not r.job.policy.startswith(HELIOS)]
        for slo in TARGET_SLOS:
            if not base:
                continue
            best = max(base, key=lambda r: _cap(results, n, r.job.policy, slo))
            rate, mine = _cap(results, n, best.job.policy, slo), _cap(results, n, HELIOS, slo)
            shown = _shown(mine, _lo(results, n, HELIOS))
            if rate <= 0:
                lines.append(
                    f"| {n} | {slo.label} | {shown} | every baseline below the "
                    f"search floor {best.job.lo:g} | - | - |"
                )
                continue
            ratio = mine / rate
            lines.append(
                f"| {n} | {slo.label} | {shown} | `{best.job.policy}` {rate:.3f} | "
                f"{_ratio(mine, rate, _lo(results, n, HELIOS))} | "
                f"{'met' if ratio >= 1.1 else 'not met'} |"
            )
    for n in slots:
        h, v = _half(results, n, HELIOS), _half(results, n, "vllm")
        if h is not None and v is not None and _cap(results, n, "vllm", STUDY_SLO) <= HALF_LOAD:
            lines.append("")
            lines.append(
                f"At {n} slots {HALF_LOAD} load units exceed every policy's capacity, "
                "so the half-load comparison applies to 32 slots only."
            )
        elif h is not None and v is not None:
            verdict = "met" if h.ttft_ms.p50 <= v.ttft_ms.p50 else "not met"
            lines.append("")
            lines.append(
                f"p50 TTFT at half load, {n} slots: Helios {h.ttft_ms.p50 * 1e-3:.3f} s,"
                f" vLLM-style {v.ttft_ms.p50 * 1e-3:.3f} s ({verdict})."
            )
    return lines


def keep_generated_sections(out: Path, page: str) -> str:
    """The sections other commands write into the same page (the calibration and the
    real-world study, ``realworld.py``) survive a re-render of this study's page."""
    from scripts.scheduling_sim.realworld import replace_section

    if not out.exists():
        return page
    old = out.read_text()
    for name in ("realworld", "calibration"):
        begin, end = f"<!-- {name}:begin", f"<!-- {name}:end -->"
        if begin in old and end in old:
            block = old[old.index(begin) : old.index(end) + len(end)]
            page = replace_section(page, name, block)
    return page


def render(
    results: list[JobResult],
    slots: list[int],
    policies: list[str],
    rows: tuple[int, int],
    out: Path,
    plots: Path,
    seconds: float,
    spot: bool = True,
    resolution: Resolution = FULL,
    plots_wanted: bool = True,
    whatifs: list[JobResult] | None = None,
    padding: list[JobResult] | None = None,
    widths: dict | None = None,
) -> int:
    a, b = rows
    quick = resolution != FULL
    lines = HEADER.format(
        rows=f"{a}-{b - 1}",
        policies="; ".join(f"`{p}`: {describe(p)}" for p in policies),
        factor="2^(1/2)" if quick else "2^(1/4)",
        bisections=resolution.bisections,
        percent=resolution.percent,
        quick=QUICK_NOTE if quick else "",
    ).splitlines()
    lines.append("")
    lines += targets(results, slots)
    lines += [""]
    lines += findings(results, slots)
    lines += ["", *whatif_section(results, whatifs or [])] if whatifs else []
    lines += ["", *padding_section(padding, (STUDY_SLO, *TARGET_SLOS))] if padding else []
    lines += (
        ["", "## Adaptive against fixed widths", "", *fixed_width_section(widths)] if widths else []
    )
    lines += mixed_cost_note()
    if 32 in slots and spot:
        lines += spot_checks(rows)
    lines += ["", *CAUSES.splitlines(), ""]
    lines += [
        "## Decode ceiling",
        "",
        "The best frame any policy can run once every slot decodes (`python -m"
        " scripts.scheduling_sim.ceiling`; 1400 cached tokens per row, the study's"
        " acceptance; load units of this window's output demand):",
        "",
        *ceiling_lines(rows),
        "",
        "## Tables per slot count",
        "",
    ]
    for s in slots:
        section = capacity_section(results, s)
        lines += section if plots_wanted else strip_plots(section)
    written = write_plots(results, plots, rows) if plots_wanted else []
    for s in slots if plots_wanted else []:
        lines += [
            f"![graph mix at half load, Helios, {s} slots](capacity/graph_mix_helios_{s}.png)",
            "",
        ]
    lines.append(f"Study time: {seconds:.0f} s of simulation on this machine.")
    out.write_text(keep_generated_sections(out, "\n".join(lines) + "\n"))
    print(f"wrote {out} and {len(written)} plots")
    return 0


PAGE_WHATIFS = "docs/capacity/whatifs.json"
PAGE_PADDING = "docs/capacity/padding.json"
PAGE_WIDTHS = "docs/capacity/widths.json"
# (slots, Helios what-if variants) that --all searches in quick mode
WHATIF_POLICIES = (
    (
        32,
        (
            "helios+full-batch+chunk2048",
            "helios+wide-mixed+r192+full-batch+chunk2048",
            "helios+late-queue",
        ),
    ),
    (4, ("helios", "helios+r8", "helios+r8+w2")),
)
# the what-ifs' search floor per slot count: at 4 slots every Helios variant misses the
# TTFT 2 s guard already at SEARCH_LO, so their searches start lower
WHATIF_LO = {4: 0.125}


def side_files(results: Path) -> dict[str, Path]:
    """Where --all writes the what-if, padding and width files: the committed names beside
    the study's own results file, prefixed by its name when it is not the page's."""
    prefix = "" if results == Path("docs/capacity/results.json") else results.stem + "-"
    return {k: results.parent / f"{prefix}{k}.json" for k in ("whatifs", "padding", "widths")}


def _existing(path: str) -> str:
    return path if Path(path).exists() else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="capacity_study")
    parser.add_argument("--slots", default="4,32")
    parser.add_argument("--rows", default="2000:2600")
    parser.add_argument("--policies", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--plots", default="docs/capacity")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--results", default=None)
    parser.add_argument(
        "--lo",
        type=float,
        default=SEARCH_LO,
        help="The capacity search's lowest load (default %(default)s); a policy failing "
        "there gets capacity 0.000, so lower it to find where it does pass.",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="Coarser search (capacities within ~4.4%%), the policies that matter, no plots "
        "or spot checks; writes /tmp/capacity-quick.md unless --out is given.",
    )
    parser.add_argument(
        "--render-only",
        action="store_true",
        help="Rewrite the page from --results (comma-separated files) without simulating "
        "the searches again.",
    )
    parser.add_argument(
        "--whatif-results",
        default="",
        help="Comma-separated results files of Helios what-if variants, rendered as a "
        "separate table against the main results' best baselines.",
    )
    parser.add_argument(
        "--padding-results",
        default="",
        help="A results file of padded baselines and Helios's step-8 what-if (one quick-mode "
        "search; scripts/scheduling_sim/padding.py), rendered as the padding section.",
    )
    parser.add_argument(
        "--width-results",
        default="",
        help="A results file of scripts/scheduling_sim/widths.py (adaptive against each fixed "
        "width), rendered as its own section.",
    )
    parser.add_argument(
        "--page",
        action="store_true",
        help="Rewrite docs/capacity.md from every committed results file (docs/capacity/"
        "results.json, whatifs.json, padding.json, widths.json) without simulating.",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="Also search the what-ifs and the padding policies (quick mode) and run the "
        "width comparison, writing their committed files, then render the whole page.",
    )
    parser.add_argument(
        "--no-spot-checks",
        action="store_true",
        help="Leave out the acceptance-learning spot check (four Helios runs).",
    )
    args = parser.parse_args(argv)
    if args.page:  # the page of record from every committed results file
        args.render_only = True
        args.whatif_results = args.whatif_results or _existing(PAGE_WHATIFS)
        args.padding_results = args.padding_results or _existing(PAGE_PADDING)
        args.width_results = args.width_results or _existing(PAGE_WIDTHS)
    a, b = (int(x) for x in args.rows.split(":"))
    slots = [int(s) for s in args.slots.split(",")]
    resolution = QUICK if args.quick else FULL
    default_policies = QUICK_POLICIES if args.quick else POLICIES
    policies = [p for p in (args.policies or ",".join(default_policies)).split(",") if p]
    for p in policies:
        describe(p)  # an unknown policy fails here, naming it, before any simulation
    if args.out is None:
        args.out = "/tmp/capacity-quick.md" if args.quick else "docs/capacity.md"
    if args.results is None:
        args.results = "/tmp/capacity-quick.json" if args.quick else "docs/capacity/results.json"
    spot = not (args.no_spot_checks or args.quick)
    if args.render_only:
        results = [r for f in args.results.split(",") for r in load_results(Path(f))]
        results = [r for r in results if r.job.slots in slots and r.job.policy in policies]
        results.sort(key=lambda r: (slots.index(r.job.slots), policies.index(r.job.policy)))
        seconds = sum(r.seconds for r in results)
    else:
        started = time.time()
        if not args.lo > 0:
            parser.error(f"--lo {args.lo}: needs a positive load")
        results = search_all(args, slots, policies, (a, b), resolution)
        seconds = time.time() - started
    return render(
        results,
        slots,
        policies,
        (a, b),
        Path(args.out),
        Path(args.plots),
        seconds,
        spot=spot,
        resolution=resolution,
        plots_wanted=not args.quick,
        whatifs=[r for f in args.whatif_results.split(",") if f for r in load_results(Path(f))],
        padding=load_results(Path(args.padding_results)) if args.padding_results else [],
        widths=load_widths(Path(args.width_results)) if args.width_results else None,
    )


def search_all(
    args: argparse.Namespace,
    slots: list[int],
    policies: list[str],
    rows: tuple[int, int],
    resolution: Resolution,
) -> list[JobResult]:
    """The main searches, saved to ``--results``; with ``--all`` also the what-if, padding
    and width files beside it, which ``args`` then names for the page."""
    jobs = [Job(s, p, rows, resolution, args.lo) for s in slots for p in policies]
    # at the stock R = 6 the only wider mixed width is B = 2, W = 3: nothing to what-if
    jobs = [j for j in jobs if not (j.slots < 8 and "wide-mixed" in j.policy)]
    results = simulate(jobs, args.jobs)
    results.sort(key=lambda r: (slots.index(r.job.slots), policies.index(r.job.policy)))
    save_results(results, Path(args.results))
    if args.all:
        side = side_files(Path(args.results))
        whatifs = simulate(
            [
                Job(n, p, rows, QUICK, WHATIF_LO.get(n, SEARCH_LO))
                for n, names in WHATIF_POLICIES
                for p in names
                if n in slots
            ],
            args.jobs,
        )
        save_results(whatifs, side["whatifs"])
        padding = simulate([Job(32, p, rows, QUICK) for p in PADDING_POLICIES], args.jobs)
        save_results(padding, side["padding"])
        widths_main(["--jobs", str(args.jobs), "--out", str(side["widths"]), "--rows", args.rows])
        args.whatif_results, args.padding_results = str(side["whatifs"]), str(side["padding"])
        args.width_results = str(side["widths"])
    return results


def simulate(jobs: list[Job], processes: int) -> list[JobResult]:
    """Runs every search, Helios's (the longest) first, printing each as it ends."""
    jobs = sorted(jobs, key=lambda j: (not j.policy.startswith(HELIOS), -j.slots))
    results: list[JobResult] = []

    def report(r: JobResult) -> None:
        results.append(r)
        print(
            f"{r.job.slots:>2} slots {r.job.policy:<28} "
            + " ".join(f"{c.slo.label}: {c.rate:.3f}" for c in r.capacities)
            + f" ({r.seconds:.0f} s)",
            flush=True,
        )

    if processes > 1:
        with ProcessPoolExecutor(processes) as pool:
            for future in as_completed([pool.submit(run_job, j) for j in jobs]):
                report(future.result())
    else:
        for j in jobs:
            report(run_job(j))
    return results


if __name__ == "__main__":
    raise SystemExit(main())
