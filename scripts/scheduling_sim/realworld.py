"""The real-world capacity study of issue 29: every profile x workload, one command.

    python -m scripts.scheduling_sim.realworld --quick   # minutes: iterate
    python -m scripts.scheduling_sim.realworld           # the full study

Writes its tables into ``docs/capacity.md`` (between the ``realworld`` markers; the
calibration table too) and SVG plots into ``docs/capacity/realworld/``. Workloads:

- ``random``: vLLM's recipe benchmark (random 1,024-token prompts, 256 outputs,
  closed loop at concurrency 8 and 64, task ``random``) on ``qwen38-flash-next-4xh100``:
  output tokens/s of every policy, the mean over seeds of the workload and the simulator
  (``Plan.random_seeds``: policies 0.1 % apart need them) with its standard error;
- ``conv-mixed``: the Azure conversation trace with the documented task mix
  (``acceptance.TRACE_MIXES["conv"]``) at 32 slots: capacity at p99 TBT 100 ms / p99
  TTFT 5 s, on every profile;
- ``long-prompt``: 30 long-running decoders while prompts of 2,000-8,000 tokens arrive
  (Poisson): p99 TBT at one load and p50 TTFT at half that load.

Bad input (an unknown profile or policy, a trace missing a column, a negative rate)
fails with one line naming it.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import random
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from ignition.simulate.acceptance import (
    CONFIDENCE,
    TASKS,
    TRACE_MIXES,
    AcceptanceError,
    accept_length,
)
from ignition.simulate.baselines import SPECULATING, PolicyError, parse_policy
from ignition.simulate.calibration import calibration_table, markdown, random_requests
from ignition.simulate.devices import DeviceError, device_from_spec
from ignition.simulate.harness import Setup, run_policy
from ignition.simulate.metrics import Metrics, measure
from ignition.simulate.results import RunResult
from ignition.simulate.search import SLO, search
from ignition.simulate.workloads import SimRequest, WorkloadError, load_trace, with_tasks
from ignition.simulate import traces
from scripts.scheduling_sim.svg import bar_chart

TRACE = str(traces.CONV)
PROFILES = ("qwen38-flash-next-h200", "qwen38-flash-next-4xh100", "qwen38-27b-dense-h200")
FIXED = ("vllm-padded", "vllm-k1-padded", "vllm-k2-padded", "vllm-k3-padded", "vllm-k5-padded")
ADAPTIVE = ("vllm-dyn-padded", "vllm-adaptive-padded", "sglang-tiers-padded", "sarathi-padded")
QUICK_FIXED = ("vllm-padded", "vllm-k1-padded", "vllm-k3-padded")
TARGET_SLO = SLO(100.0, 5_000.0)
# Helios as built, and with the one-lane programs only (issue 39: the seed's L = 1 beside
# the default)
HELIOS_ROWS = ("helios", "helios+l1")
CONFIDENCE_KNOB = "eagle2"
ERRORS = (WorkloadError, PolicyError, DeviceError, AcceptanceError, ValueError)


@dataclass(frozen=True)
class Plan:
    quick: bool
    rows: tuple[int, int] = (2000, 2600)
    random_prompts_per_slot: int = 5
    long_decoders: int = 30
    long_prompts: int = 40
    decoder_output: int = 4000
    only: tuple[str, ...] = ()  # --baselines: these instead of the study's
    trace: str = TRACE

    def random_seeds(self, concurrency: int) -> range:
        """Seeds of the random-token rows: c = 8 runs take about a second, c = 64 ones
        about 20 s for Helios (the quick plan takes a quarter of them)."""
        count = 64 if concurrency <= 8 else 8
        return range(count // 4 if self.quick else count)

    @property
    def fixed(self) -> tuple[str, ...]:
        if self.only:
            return tuple(p for p in self.only if parse_policy(p).family == "vllm")
        return QUICK_FIXED if self.quick else FIXED

    @property
    def baselines(self) -> tuple[str, ...]:
        return self.only or (*self.fixed, *ADAPTIVE)


def _b8192(name: str) -> str:
    """The recipe benchmark runs at vLLM's API-server budget 8192 (Sarathi keeps its own)."""
    parsed = parse_policy(name)
    if parsed.family not in ("vllm", *SPECULATING):
        return name
    k = f"-k{parsed.drafts}" if parsed.family == "vllm" and parsed.drafts else ""
    return f"{parsed.family}-b8192{k}" + ("-padded" if parsed.padded else "")


def random_workload(concurrency: int, seed: int = 0) -> list[SimRequest]:
    rng = random.Random(seed)
    task = TASKS["random"]
    return [
        replace(r, acceptance=task.draw(rng), task="random", round_sigma=task.round_sigma)
        for r in random_requests(concurrency, ())
    ]


def conv_workload(plan: Plan, seed: int = 0) -> Callable[[float], list[SimRequest]]:
    start, end = plan.rows
    base = load_trace(plan.trace, start=start, count=end - start)
    base = with_tasks(base, TRACE_MIXES["conv"], seed)

    def at(rate: float) -> list[SimRequest]:
        if not math.isfinite(rate) or rate <= 0:
            raise WorkloadError(f"rate = {rate!r}: must be a positive load scale")
        return [replace(r, arrival_ms=r.arrival_ms / rate) for r in base]

    return at


def long_prompt_workload(plan: Plan, load: float, seed: int = 0) -> list[SimRequest]:
    """``long_decoders`` chat decoders from time zero (short prompts, long outputs) while
    ``long_prompts`` prompts of 2,000-8,000 tokens arrive at ``load`` per second."""
    if not math.isfinite(load) or load <= 0:
        raise WorkloadError(f"long-prompt load = {load!r}: must be a positive rate")
    rng = random.Random(seed)
    chat = TASKS["chat"]
    out = [
        SimRequest(rng.uniform(0, 200), 256, plan.decoder_output, chat.draw(rng), task="chat")
        for _ in range(plan.long_decoders)
    ]
    t = 1000.0
    for _ in range(plan.long_prompts):
        t += rng.expovariate(load) * 1e3
        out.append(SimRequest(t, rng.randint(2000, 8000), 64, chat.draw(rng), task="chat"))
    return [
        replace(r, round_sigma=chat.round_sigma) for r in sorted(out, key=lambda r: r.arrival_ms)
    ]


def setup_for(profile: str, slots: int, envelope: int) -> Setup:
    return Setup(
        slots=slots,
        speculative_token_capacity=envelope,
        device=device_from_spec(profile),
        confidence_noise=CONFIDENCE[CONFIDENCE_KNOB],
    )


def random_setup(c: int, seed: int = 0) -> Setup:
    """The random-token runs' setup at concurrency ``c`` (the study's and every script's
    that reproduces it): 4x H100, ``c`` slots, the speculative envelope 32 up to c = 8
    and 128 above, ``seed`` for the simulator's noise."""
    envelope = 32 if c <= 8 else 128
    return replace(setup_for("qwen38-flash-next-4xh100", c, envelope), seed=seed)


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def random_run(c: int, name: str, seed: int = 0) -> RunResult:
    """One closed-loop run of vLLM's recipe benchmark at concurrency ``c``; ``seed`` draws
    the requests' acceptance and the simulator's noise."""
    return run_policy(name, random_workload(c, seed), random_setup(c, seed))


def _random_run(c: int, name: str, seed: int = 0) -> float:
    """:func:`random_run`'s output tokens/s (a pool job)."""
    t = time.time()
    got = measure(random_run(c, name, seed)).output_tokens_per_s
    if seed == 0:
        _log(f"random c={c} {name}: {got:.0f} tok/s at seed 0 ({time.time() - t:.0f} s)")
    return got


@dataclass(frozen=True)
class SeedMean:
    """Output tok/s over seeds: the mean and its standard error."""

    mean: float
    se: float
    count: int

    @classmethod
    def of(cls, values: Sequence[float]) -> SeedMean:
        n = len(values)
        mean = sum(values) / n
        var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
        return cls(mean, math.sqrt(var / n), n)

    def __format__(self, spec: str) -> str:
        return f"{self.mean:,.1f} +- {self.se:.1f}"


def pool_map(fn: Callable[..., object], calls: Sequence[tuple], jobs: int) -> list:
    """``fn(*args)`` for each args tuple, in order; ``jobs`` > 1 runs them in that many
    processes (each simulation is single-threaded Python, so processes are what scale)."""
    if jobs <= 1 or len(calls) <= 1:
        return [fn(*args) for args in calls]
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(min(jobs, len(calls)), mp_context=context) as pool:
        return list(pool.map(fn, *zip(*calls, strict=True)))


def study_random(plan: Plan, jobs: int = 1) -> tuple[list[str], dict]:
    counts = {c: len(plan.random_seeds(c)) for c in (8, 64)}
    lines = [
        f"Output tok/s, mean +- standard error over seeds 0-{counts[8] - 1} (c = 8) and "
        f"0-{counts[64] - 1} (c = 64) of the workload and the simulator.",
        "",
        "| concurrency | policy | tok/s | vs no speculation |",
        "|---|---|---|---|",
    ]
    names = (*HELIOS_ROWS, *(_b8192(p) for p in plan.baselines))
    calls = [(c, name, seed) for c in (8, 64) for name in names for seed in plan.random_seeds(c)]
    runs: dict[tuple[int, str], list[float]] = {}
    for (c, name, _), got in zip(calls, pool_map(_random_run, calls, jobs), strict=True):
        runs.setdefault((c, name), []).append(got)
    result = {}
    for c in (8, 64):
        got = {name: SeedMean.of(runs[(c, name)]) for name in names}
        plain = got[_b8192("vllm-padded")]
        for name, v in got.items():
            lines.append(f"| {c} | `{name}` | {v} | {v.mean / plain.mean:.3f}x |")
        fixed = {n: got[_b8192(n)] for n in plan.fixed if n != "vllm-padded"}
        best_k = max(fixed, key=lambda n: fixed[n].mean)
        result[c] = {
            "helios": got["helios"],
            "plain": plain,
            "best_fixed": (best_k, fixed[best_k]),
            "all": {n: v.mean for n, v in got.items()},
        }
    return lines, result


def _versus(helios: SeedMean, peer: SeedMean) -> str:
    """Helios / peer, and the difference of the means with its standard error."""
    se = math.sqrt(helios.se**2 + peer.se**2)
    return f"{helios.mean / peer.mean:.3f}x ({helios.mean - peer.mean:+.1f} +- {se:.1f} tok/s)"


def _conv_capacity(plan: Plan, profile: str, name: str, seed: int = 0) -> float:
    """One policy's capacity on the conversation trace at ``TARGET_SLO`` (a pool job);
    ``seed`` draws the tasks' acceptance and the simulator's noise (the study's: 0)."""
    factor, bisections = (2**0.5, 1) if plan.quick else (2**0.25, 3)

    def tick(policy: str, rate: float) -> None:
        _log(f"conv {profile} {policy}: ran load {rate:.3f}")

    found, _ = search(
        [name],
        [TARGET_SLO],
        conv_workload(plan, seed),
        replace(setup_for(profile, 32, 128), seed=seed),
        lo=0.0625,
        on_run=tick,
        factor=factor,
        bisections=bisections,
    )
    return found[0].rate


def study_conv(plan: Plan, profiles: Sequence[str], jobs: int = 1) -> tuple[list[str], dict]:
    lines = [
        "| profile | policy | capacity (load units) | Helios / it |",
        "|---|---|---|---|",
    ]
    names = [*HELIOS_ROWS, *plan.baselines]
    calls = [(plan, profile, name) for profile in profiles for name in names]
    found = pool_map(_conv_capacity, calls, jobs)
    result = {}
    for profile in profiles:
        caps = {name: rate for (_, p, name), rate in zip(calls, found, strict=True) if p == profile}
        helios = caps["helios"]
        for name in names:
            ratio = "-" if caps[name] == 0 else f"{helios / caps[name]:.2f}x"
            lines.append(f"| {profile} | `{name}` | {caps[name]:.3f} | {ratio} |")
        best = max((n for n in names if n not in HELIOS_ROWS), key=lambda n: caps[n])
        result[profile] = {"helios": helios, "best": (best, caps[best]), "all": caps}
    return lines, result


def _long_runs(plan: Plan, name: str, load: float) -> tuple[Metrics, Metrics]:
    """One policy on the long-prompt workload at ``load`` and at half of it (a pool job)."""
    t = time.time()
    setup = setup_for("qwen38-flash-next-h200", 32, 128)
    full, half = long_prompt_workload(plan, load), long_prompt_workload(plan, load / 2)
    a, b = measure(run_policy(name, full, setup)), measure(run_policy(name, half, setup))
    _log(f"long {name}: p99 TBT {a.tbt_ms.p99:.0f} ms ({time.time() - t:.0f} s)")
    return a, b


def study_long(plan: Plan, load: float = 0.5, jobs: int = 1) -> tuple[list[str], dict]:
    lines = [
        f"| policy | p99 TBT at {load:g}/s | p50 TTFT at {load / 2:g}/s | p99 TTFT at {load:g}/s |",
        "|---|---|---|---|",
    ]
    names = (*HELIOS_ROWS, *plan.baselines)
    runs = pool_map(_long_runs, [(plan, name, load) for name in names], jobs)
    result: dict[str, tuple[Metrics, Metrics]] = dict(zip(names, runs, strict=True))
    for name, (a, b) in result.items():
        lines.append(
            f"| `{name}` | {a.tbt_ms.p99:.0f} ms | {b.ttft_ms.p50 / 1e3:.2f} s | "
            f"{a.ttft_ms.p99 / 1e3:.2f} s |"
        )
    return lines, result


def acceptance_lines() -> list[str]:
    """The task table: each task's conditional acceptance and its published figure."""
    lines = [
        "| task | conditional p1 .. p8 | tokens / round at K = 3, 5, 7 | request / round spread "
        "| published figure |",
        "|---|---|---|---|---|",
    ]
    for t in TASKS.values():
        c = t.conditional()
        lengths = ", ".join(f"{accept_length(c, k):.2f}" for k in (3, 5, 7))
        lines.append(
            f"| {t.name} | {', '.join(f'{p:.2f}' for p in c)} | {lengths} | "
            f"{t.spread} / {t.round_sigma} | {t.source} |"
        )
    lines += [
        "",
        "Drafter confidence (logit noise around the round's true acceptance): "
        + ", ".join(f"`{k}` {v}" for k, v in CONFIDENCE.items())
        + f"; the study uses `{CONFIDENCE_KNOB}`. Azure trace mixes (no labels in the "
        "traces; assigned): " + "; ".join(f"`{k}` {v}" for k, v in TRACE_MIXES.items()) + ".",
    ]
    return lines


def verdicts(random_r: dict, conv_r: dict, long_r: dict) -> list[str]:
    out = ["| target | measured | holds |", "|---|---|---|"]
    for c, r in sorted(random_r.items()):
        helios, plain = r["helios"], r["plain"]
        name, best = r["best_fixed"]
        out.append(
            f"| 4x H100 random, c = {c}: Helios >= 1.0x no speculation (seed mean) | "
            f"{_versus(helios, plain)} | {'yes' if helios.mean >= plain.mean else 'no'} |"
        )
        out.append(
            f"| 4x H100 random, c = {c}: Helios >= best fixed K (`{name}`, seed mean) | "
            f"{_versus(helios, best)} | {'yes' if helios.mean >= best.mean else 'no'} |"
        )
    for profile, r in conv_r.items():
        bar = 1.0 if "dense" in profile else 1.15
        name, best = r["best"]
        ratio = r["helios"] / best if best else math.inf
        out.append(
            f"| conv mixed, {profile}: capacity >= {bar}x best (`{name}`) | "
            f"{ratio:.2f}x | {'yes' if ratio >= bar else 'no'} |"
        )
    baselines = {n: m for n, m in long_r.items() if n not in HELIOS_ROWS}
    best = min(baselines, key=lambda n: baselines[n][0].tbt_ms.p99)
    h = long_r["helios"]
    tbt = h[0].tbt_ms.p99 / baselines[best][0].tbt_ms.p99
    out.append(
        f"| long prompt: p99 TBT <= 1.2x best (`{best}`) | {tbt:.2f}x | "
        f"{'yes' if tbt <= 1.2 else 'no'} |"
    )
    vllm = long_r.get("vllm-padded")
    if vllm:
        ttft = h[1].ttft_ms.p50 / vllm[1].ttft_ms.p50
        out.append(
            f"| long prompt: half-load p50 TTFT <= 1.0x vLLM-style | {ttft:.2f}x | "
            f"{'yes' if ttft <= 1.0 else 'no'} |"
        )
    return out


def plots(out: Path, random_r: dict, conv_r: dict, long_r: dict) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for c, r in random_r.items():
        p = out / f"random-4xh100-c{c}.svg"
        bar_chart(p, f"random tokens, 4x H100, concurrency {c}: output tok/s", r["all"])
        written.append(p)
    for profile, r in conv_r.items():
        p = out / f"conv-mixed-{profile}.svg"
        bar_chart(p, f"conv mixed, {profile}: capacity at TBT 100 ms / TTFT 5 s", r["all"])
        written.append(p)
    p = out / "long-prompt-h200.svg"
    bar_chart(
        p, "long prompts, H200: p99 TBT (ms)", {n: m[0].tbt_ms.p99 for n, m in long_r.items()}
    )
    written.append(p)
    return written


def replace_section(text: str, name: str, body: str) -> str:
    begin, end = f"<!-- {name}:begin", f"<!-- {name}:end -->"
    if begin in text:
        a = text.index(begin)
        b = text.index(end) + len(end)
        return text[:a] + body.rstrip() + text[b:]
    first = text.index("\n") + 1
    return text[:first] + "\n" + body.rstrip() + "\n" + text[first:]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rows, policies, coarser")
    parser.add_argument("--out", default="docs/capacity.md")
    parser.add_argument("--plots", default="docs/capacity/realworld")
    parser.add_argument("--profiles", default=",".join(PROFILES))
    parser.add_argument("--trace", default=TRACE, help="conversation trace CSV")
    parser.add_argument("--jobs", type=int, default=2, help="simulation processes")
    parser.add_argument(
        "--baselines",
        default="",
        help="comma-separated baseline policies instead of the study's (must include "
        "vllm-padded, the no-speculation reference, and a fixed-K vllm-kN-padded)",
    )
    args = parser.parse_args(argv)
    try:
        if args.jobs < 1:
            raise ValueError(f"--jobs = {args.jobs}: must be at least 1")
        profiles = [p.strip() for p in args.profiles.split(",") if p.strip()]
        for p in profiles:
            device_from_spec(p)
        only = tuple(p.strip() for p in args.baselines.split(",") if p.strip())
        for p in only:
            if parse_policy(p).family == "helios":
                raise PolicyError(f"--baselines: {p!r} is Helios, which every study runs")
        if only and "vllm-padded" not in only:
            raise PolicyError("--baselines: include vllm-padded (the no-speculation reference)")
        fixed_k = [p for p in only if parse_policy(p).family == "vllm" and parse_policy(p).drafts]
        if only and not fixed_k:
            raise PolicyError(
                "--baselines: include a fixed-K policy such as vllm-k1-padded (the random "
                "benchmark's best-fixed-K reference)"
            )
        plan = (
            Plan(
                True,
                (2000, 2200),
                long_prompts=20,
                decoder_output=2000,
                only=only,
                trace=args.trace,
            )
            if args.quick
            else Plan(False, only=only, trace=args.trace)
        )
        conv_workload(plan)  # a malformed trace fails before any run
        start = time.time()
        calibration = markdown(calibration_table())
        random_lines, random_r = study_random(plan, args.jobs)
        conv_lines, conv_r = study_conv(plan, profiles, args.jobs)
        long_lines, long_r = study_long(plan, jobs=args.jobs)
    except ERRORS as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    minutes = (time.time() - start) / 60
    written = plots(Path(args.plots), random_r, conv_r, long_r)
    mode = "quick mode" if plan.quick else "full study"
    command = "python -m scripts.scheduling_sim.realworld" + (" --quick" if plan.quick else "")
    body = "\n".join(
        [
            f"<!-- realworld:begin ({command}; do not edit by hand) -->",
            f"## Real-world capacity (issue 29, {mode})",
            "",
            f"Reproduce: `{command}` ({minutes:.1f} min, {args.jobs} processes). "
            "Devices: `docs/devices.md`;",
            "acceptance by task with per-request and per-round spread, drafter confidence",
            f"`{CONFIDENCE_KNOB}` (`ignition/simulate/acceptance.py`); baselines padded to vLLM's",
            f"capture sizes. Trace rows {plan.rows[0]}-{plan.rows[1] - 1} of "
            f"`{Path(plan.trace).name}` with the",
            f"task mix {TRACE_MIXES['conv']}. Plots: " + ", ".join(f"`{p}`" for p in written) + ".",
            "",
            "### Targets",
            "",
            *verdicts(random_r, conv_r, long_r),
            "",
            "### Acceptance by task",
            "",
            *acceptance_lines(),
            "",
            "### Random tokens, 4x H100 (vLLM's recipe benchmark, closed loop)",
            "",
            *random_lines,
            "",
            "### Conversation trace, mixed tasks, 32 slots: capacity at p99 TBT 100 ms / TTFT 5 s",
            "",
            *conv_lines,
            "",
            "### Long prompts while 30 decoders run, one H200, 32 slots",
            "",
            *long_lines,
            "<!-- realworld:end -->",
        ]
    )
    calib = "\n".join(
        [
            "<!-- calibration:begin (python -m ignition.simulate.calibration; "
            "do not edit by hand) -->",
            "## Calibration: `qwen38-flash-next-4xh100` against vLLM's recipe table",
            "",
            "vLLM's published Qwen3.8-Flash-Next measurements (4x H100, TP4, FP8, PLE on",
            "the CPU; random 1,024-token prompts, 256 outputs; MTP at the recipe's",
            "`num_speculative_tokens: 3`, ~36.5% acceptance) against the simulated",
            "vLLM-style baselines on the calibrated profile (`docs/devices.md`): closed loop",
            "at the concurrency, budget 8192, vLLM capture-size padding. Bar: every",
            "throughput within 10%, MTP / no-MTP within 0.05. Reproduce:",
            "`python -m ignition.simulate.calibration`.",
            "",
            calibration,
            "<!-- calibration:end -->",
        ]
    )
    path = Path(args.out)
    text = path.read_text() if path.exists() else "# Capacity\n"
    text = replace_section(text, "calibration", calib)
    text = replace_section(text, "realworld", body)
    path.write_text(text)
    print("\n".join(verdicts(random_r, conv_r, long_r)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
