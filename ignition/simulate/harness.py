"""Runs one named policy over one workload on one device with a given number of slots:
``helios`` through the real Scheduler, every other name a baseline (``baselines.py``) on
the baseline engine, with the same requests, device model, noise and slots
(docs/simulate.md, "harness.py")."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ignition.components.catalog import Catalog
from ignition.helios import (
    PolicyConfig,
    Resources,
    SpeculationMode,
    balanced,
    flat_cadence,
    objective,
    throughput,
)
from ignition.simulate.baselines import (
    HELIOS,
    PARAMETRIC_VARIANTS,
    PolicyError,
    chunk_variant,
    envelope_variant,
    grid_variant,
    jit_variant,
    lanes_variant,
    make_baseline,
    parse_policy,
    ramp_variant,
    slot_variant,
    tbt_variant,
    wide_variant,
    width_variant,
)
from ignition.simulate.conversation import run_conversation_baseline
from ignition.simulate.devices import DeviceModel, H200Roofline
from ignition.simulate.engine import LateWatch, run_baseline
from ignition.simulate.helios_catalog import (
    CATALOG_VARIANTS,
    RECOMMENDED_LANES,
    helios_catalog,
)
from ignition.runtime.loop.second_slot import DEFAULT_QUEUE_LEAD_MS
from ignition.simulate.jit_queue import JIT_QUEUE_LEAD_NS, JIT_WAKE_PLAN_NS
from ignition.simulate.multiturn import run_retention
from ignition.simulate.multiturn_turns import MultiTurnSpec
from ignition.simulate.results import RunResult
from ignition.simulate.retention_results import RetentionRun
from ignition.simulate.scenario import Scenario
from ignition.simulate.sim import Simulation
from ignition.simulate.sim_report import report
from ignition.simulate.workloads import SimRequest

LATE_QUEUE_LEAD_NS = 1_000_000  # helios+late-queue: a host round trip before the frame ends


@dataclass(frozen=True)
class Setup:
    """What every policy of one comparison shares."""

    slots: int = 32
    speculative_token_capacity: int = 128
    device: DeviceModel = field(default_factory=H200Roofline)
    seed: int = 0
    noise_sigma: float = 0.03
    recipe: str = "qwen38"
    helios_policy: PolicyConfig = field(default_factory=objective)  # the default preset
    trained_acceptance: bool = False  # preseed Helios with each request's true acceptance
    confidence_noise: float = 0.0  # the drafter's confidence calibration (acceptance.CONFIDENCE)
    # What a scenario file states (``scenario_setup``); the defaults are the trace path's.
    catalog: Catalog | None = None  # Helios's catalog as given; None: the recipe's for slots, R
    end_ms: float = math.inf  # every policy stops at this simulated time
    preseed_costs: bool = True  # Helios starts with every graph measured at its nominal cost
    speculation: SpeculationMode | None = None  # None: adaptive (fixed for a width variant)
    resources: Resources | None = None  # Helios's slots and pages; None: ``slots`` slots
    helios_report: bool = False  # keep sim_report.report (graphs, trace) in info["report"]
    # A runtime.tracing.TraceRecorder fed by the Helios run (simulate --trace-file).
    trace: Any = field(default=None, compare=False)


def true_survivals(conditional: Sequence[float]) -> tuple[float, ...]:
    """Prefix survivals s_d = p_1 * ... * p_d of a request's conditional acceptance: what
    Helios's per-depth estimates (and ``RequestSpec.acceptance_prior``) mean, so a
    ``trained`` preseed is the truth rather than the conditional probabilities (which
    overstate every depth past the first: 0.5 for s_4 where the truth is 0.168)."""
    out, p = [], 1.0
    for q in conditional:
        p *= q
        out.append(p)
    return tuple(out)


# they set PolicyConfig or the transport, not the catalog
POLICY_VARIANTS = (tbt_variant, slot_variant, ramp_variant, jit_variant)


# Transport variants: each replaces the runtime's default just-in-time second slot.
TRANSPORT_VARIANTS = frozenset({"at-once", "one-frame", "late-queue", "jit-queue", "jit-wake"})

# The rule variants that set PolicyConfig fields to fixed values, applied in this order
# (a later entry wins where two set the same field).
RULE_SWITCHES: dict[str, dict[str, object]] = {
    "first-delivery": {"first_delivery": 1.0},
    "gen-left-out": {"generation_left_out": True},
    "twin": {"generation_twin": True},
    "no-twin": {"generation_twin": False},
    "prompt-runs": {"prompt_runs": True},
    "no-prompt-runs": {"prompt_runs": False},
    "mixed-width": {"mixed_width": True},
    "no-mixed-width": {"mixed_width": False},
    "keep-left-out": {"left_out": False},
    "request-optimism": {"population_bounded_optimism": False},
    "moving-bound": {"population_bound_memory": 0.0},
    "spec-target": {"speculation_within_target": True},
    "wide-past-target": {"speculation_within_target": False},
    "refresh-any": {"refresh_could_win": False},
    "refresh-could-win": {"refresh_could_win": True},
}


def policy_for(variants: Sequence[str], default: PolicyConfig) -> PolicyConfig:
    """The PolicyConfig a Helios variant runs: a preset variant (``throughput``,
    ``balanced``, ``flat-cadence``) replaces ``default``, then the rule variants adjust
    its fields."""
    policy = default
    if "throughput" in variants:
        policy = throughput()
    elif "balanced" in variants:
        policy = balanced()
    elif "flat-cadence" in variants:
        policy = flat_cadence()
    for variant, fields in RULE_SWITCHES.items():
        if variant in variants:
            policy = replace(policy, **fields)
    rule = next((v.removesuffix("-newcomer") for v in variants if v.endswith("-newcomer")), None)
    if rule is not None:
        policy = replace(policy, newcomer_rule=rule)
    if "no-tbt" in variants:
        policy = replace(policy, tbt_target_ms=0.0)
    for t in filter(None, map(tbt_variant, variants)):
        policy = replace(policy, tbt_target_ms=float(t))
    for sp in (v for v in map(slot_variant, variants) if v is not None):
        policy = replace(policy, slot_pressure=float(sp))
    for p in (v for v in map(ramp_variant, variants) if v is not None):
        policy = replace(policy, cadence_ramp=float(p))
    return policy


def helios_simulation(
    requests: Sequence[SimRequest], setup: Setup, name: str = HELIOS
) -> Simulation:
    """The Simulation of Helios variant ``name``, for callers that watch a run from
    inside (``run_helios`` runs it)."""
    variants = parse_policy(name).extras.get("variants", ())
    if setup.trained_acceptance or "trained" in variants:
        requests = [replace(r, acceptance_prior=true_survivals(r.acceptance)) for r in requests]
    wide = 2048 if "wide-mixed" in variants else 0
    wide_from = [b for b in map(wide_variant, variants) if b is not None]
    policy = policy_for(variants, setup.helios_policy)
    envelopes = [r for r in map(envelope_variant, variants) if r is not None]
    envelope = envelopes[-1] if envelopes else setup.speculative_token_capacity
    chunks = [c for c in map(chunk_variant, variants) if c is not None]
    max_prompt = chunks[-1] if chunks else 0
    widths = [w for w in map(width_variant, variants) if w is not None]
    width = widths[-1] if widths else 0
    declared = [n for n in map(lanes_variant, variants) if n is not None]
    grids = [g for g in map(grid_variant, variants) if g is not None]
    lanes, lanes_upto = (1, 0) if "l1" in variants else (declared[0] if declared else (0, 0))
    if setup.catalog is not None:
        shaping = [
            v
            for v in variants
            if v in CATALOG_VARIANTS
            or any(f(v) is not None for f in PARAMETRIC_VARIANTS if f not in POLICY_VARIANTS)
        ]
        if shaping:
            raise PolicyError(
                f"{name}: {shaping[0]} shapes the recipe's catalog; the setup gives its own"
            )
        catalog = setup.catalog
    else:
        catalog = helios_catalog(
            setup.recipe,
            setup.slots,
            envelope,
            wide_mixed=wide,
            wide_from=wide_from[-1] if wide_from else 0,
            max_prompt=max_prompt,
            full_batch="full-batch" in variants,
            step8="step8" in variants,
            width=width,
            lanes=lanes,
            lanes_upto=lanes_upto,
            more_lanes=tuple(declared[1:]) if lanes > 1 else (),
            lane_option=RECOMMENDED_LANES if "rec-lanes" in variants else None,
            grid=grids[-1] if grids else 0,
            ragged="ragged" in variants,
            seed_buckets="seed-buckets" in variants,
            seed_lanes="seed-lanes" in variants,
            seed_wide="seed-wide" in variants,
            pow2_batches="pow2-batches" in variants,
        )
    speculation = setup.speculation or (
        SpeculationMode.FIXED if width else SpeculationMode.ADAPTIVE
    )
    scenario = Scenario(
        catalog=catalog,
        durations=setup.device,
        requests=tuple(requests),
        policy=policy,
        seed=setup.seed,
        end_ms=setup.end_ms,
        noise_sigma=setup.noise_sigma,
        preseed_costs=setup.preseed_costs,
        speculation=speculation,
        resources=setup.resources or Resources(num_request_slots=setup.slots),
        confidence_noise=setup.confidence_noise,
    )
    sim = Simulation(scenario)
    sim.trace = setup.trace
    if "one-frame" in variants:
        sim.window = 1
    sim.row_oracle = "row-oracle" in variants
    sim.ple_stall = "ple-stall" in variants
    sim.prompt_pairs = "prompt-pairs" in variants
    if "no-refresh" in variants:  # what-if: the timing-refresh ledger never earns credit
        sim.scheduler.refresh.numerator = 0
    if "no-learning" in variants:  # what-if: the acceptance-learning ledger never earns
        sim.scheduler.learning.numerator = 0
    if "late-queue" in variants:
        sim.queue_lead_ns = LATE_QUEUE_LEAD_NS
    if "jit-queue" in variants or "jit-wake" in variants:
        sim.jit_lead_ns = JIT_QUEUE_LEAD_NS
    if "jit-wake" in variants:
        sim.jit_wake_ns = JIT_WAKE_PLAN_NS
    leads = [ms for ms in map(jit_variant, variants) if ms is not None]
    if leads:
        sim.jit_lead_ns, sim.jit_wake_ns = leads[-1] * 1_000_000, JIT_WAKE_PLAN_NS
    elif not TRANSPORT_VARIANTS.intersection(variants):
        # the runtime's default (RuntimeOptions.queue_lead_ms): the just-in-time slot
        sim.jit_lead_ns = round(DEFAULT_QUEUE_LEAD_MS * 1_000_000)
        sim.jit_wake_ns = JIT_WAKE_PLAN_NS
    return sim


def run_helios(
    requests: Sequence[SimRequest],
    setup: Setup,
    ttft_guard_ms: float | None = None,
    name: str = HELIOS,
) -> RunResult:
    sim = helios_simulation(requests, setup, name)
    if ttft_guard_ms is not None:
        sim.watch = LateWatch([s.record for s in sim.streams], ttft_guard_ms, 0.99)
    result = sim.run_result(name)
    if setup.helios_report:
        result.info["report"] = report(sim, sim.end_ns)
    return result


def run_policy(
    name: str,
    requests: Sequence[SimRequest],
    setup: Setup,
    ttft_guard_ms: float | None = None,
) -> RunResult:
    """One run; ``ttft_guard_ms`` stops it once more than 1% of requests are later."""
    parsed = parse_policy(name)
    if parsed.family == HELIOS:
        return run_helios(requests, setup, ttft_guard_ms, name)
    return run_baseline(
        make_baseline(name),
        requests,
        setup.device,
        slots=setup.slots,
        seed=setup.seed,
        noise_sigma=setup.noise_sigma,
        ttft_guard_ms=ttft_guard_ms,
        confidence_noise=setup.confidence_noise,
        end_ms=setup.end_ms,
    )


def scenario_setup(scenario: Scenario) -> Setup:
    """A scenario file's setup: its catalog, durations, policy, resources and run limits,
    Helios's report kept (``info["report"]``); its requests are the workload."""
    return Setup(
        slots=scenario.resources.num_request_slots,
        device=scenario.durations,
        seed=scenario.seed,
        noise_sigma=scenario.noise_sigma,
        helios_policy=scenario.policy,
        confidence_noise=scenario.confidence_noise,
        catalog=scenario.catalog,
        end_ms=scenario.end_ms,
        preseed_costs=scenario.preseed_costs,
        speculation=scenario.speculation,
        resources=scenario.resources,
        helios_report=True,
    )


def run_conversations(
    name: str,
    spec: MultiTurnSpec,
    setup: Setup,
    snapshot_rows: int = 0,
    payoff: bool = True,
) -> RetentionRun:
    """One policy over multi-turn conversations. Helios runs the runtime engine with
    ``snapshot_rows`` retained checkpoints on its recipe's non-speculative catalog (the
    device times frames without noise); a baseline retains nothing and ignores
    ``snapshot_rows`` and ``payoff``. Helios variants do not apply here."""
    parsed = parse_policy(name)
    if parsed.family != HELIOS:
        run, _ = run_conversation_baseline(
            make_baseline(name),
            spec,
            setup.device,
            slots=setup.slots,
            seed=setup.seed,
            noise_sigma=setup.noise_sigma,
        )
        return run
    if parsed.extras.get("variants"):
        raise PolicyError(f"{name}: conversations run plain helios (no variants)")
    catalog = setup.catalog or helios_catalog(
        setup.recipe, setup.slots, setup.speculative_token_capacity, speculation="off"
    )
    return run_retention(
        spec,
        snapshot_rows,
        catalog,
        slots=setup.slots,
        device=setup.device,
        policy=setup.helios_policy,
        payoff=payoff,
    )
