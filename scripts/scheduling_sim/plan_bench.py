"""plan() latency on the catalog the runtime loads, with measured costs (not a test).

Run ``python -m scripts.scheduling_sim.plan_bench [--json] [--iterations N]`` (or
``python benchmarks/helios_plan.py``). It measures Helios from the inside (it queues a
frame through the selection's own functions and times plan()'s phases), so it lives
with the scheduling experiments, not in the runtime's rooms. For each decode
mode (off / fixed / adaptive) the qwen38 catalog is filtered the way the runtime
filters it at load (``select_for_mode`` plus the state programs: snapshot, restore and
initialization), and
plan() is timed at 1, 8 and 64 active requests (three quarters decoding, the rest
waiting on prompts), with an empty queue and with one decode frame queued. CPU time
is the figure that matters on a shared machine; wall p99 there shows preemption.

Those cases repeat plan() in one unchanged state. The runtime never does: every plan()
there follows a commit or a completion. ``--loop`` adds the case the engine runs, plan()
timed inside a commit/complete loop that keeps one frame queued, so caches that only
serve an unchanged state are seen for what they are worth.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import replace

from ignition.components.catalog import Catalog
from ignition.components.program_kinds import GraphKind
from ignition.components.state_programs import STATE_PROGRAMS, state_programs
from ignition.helios.config import (
    DEFAULT_PRESET,
    PRESETS,
    PolicyConfig,
    SpeculationMode,
    policy_from_preset,
)
from ignition.helios.decide.policy import (
    QUEUEABLE_KINDS,
    select,
)
from ignition.helios.decide.selector import Exhaustive
from ignition.helios.plans import ExecutionClass, LaneRole, ScheduledPlan
from ignition.helios.reports import (
    CompletionRecord,
    CompletionReport,
    ConfidenceSidecar,
    ExecutionTiming,
)
from ignition.helios.scheduler import Scheduler
from ignition.helios.state.cost import Freshness
from ignition.helios.types import Fence, RequestSpec, Resources
from ignition.simulate.scenario import Formula

H200_LIKE = {
    GraphKind.PREFILL: Formula(base_ms=38.0, per_token_ms=0.006),
    GraphKind.DECODE: Formula(base_ms=2.4, per_row_ms=1.0),
    GraphKind.SPECULATIVE: Formula(
        base_ms=2.4, per_row_ms=1.0, per_token_ms=0.6, per_draft_ms=0.25
    ),
    GraphKind.MIXED: Formula(base_ms=38.0, per_row_ms=1.0, per_token_ms=0.006, per_draft_ms=0.25),
}
STATE_MS = 0.05
MODES = ("off", "fixed", "adaptive")
SIZES = (1, 8, 64)


def qwen38_catalog() -> Catalog:
    from ignition.components.capacity import plan_catalog
    from ignition.recipes import LoadOptions, get_recipe

    return plan_catalog(get_recipe("qwen38"), LoadOptions(mixed_prefill=True))


def runtime_catalog(mode: str, initialize: bool = True) -> tuple[Catalog, SpeculationMode]:
    """The catalog and scheduler mode the runtime uses for one decode mode; ``initialize``
    False leaves out the init program (the figure plan() had before init was scheduled)."""
    from ignition.components.mode_selection import select_for_mode

    selected = select_for_mode(qwen38_catalog(), mode)
    programs = STATE_PROGRAMS if initialize else state_programs(initialize=False)
    schedulable = replace(selected, descriptors=(*selected.descriptors, *programs))
    return schedulable, SpeculationMode.FIXED if mode == "fixed" else SpeculationMode.ADAPTIVE


def prepared(
    catalog: Catalog,
    num_requests: int,
    speculation: SpeculationMode = SpeculationMode.ADAPTIVE,
    policy: PolicyConfig | None = None,
) -> Scheduler:
    s = Scheduler(
        catalog,
        policy=policy or PolicyConfig(),
        resources=Resources(num_request_slots=64),
        speculation=speculation,
    )
    for d in s.descriptors:
        s.seed_cost(d, round(H200_LIKE[d.kind].duration_ms(d) * 1e6))
    for d in s.state_descriptors:
        s.seed_cost(d, round(STATE_MS * 1e6))
    decoders = [
        s.admit(RequestSpec(64, 100_000, acceptance_prior=(0.7, 0.5, 0.3, 0.2, 0.1)))
        for _ in range(max(1, num_requests * 3 // 4))
    ]
    fence, now = 0, 0
    while any(not s.requests[h].is_decoder for h in decoders):
        plan = s.plan()
        fence += 1
        s.commit(plan, Fence(fence))
        now += plan.estimated_duration_ns
        s.advance_to(now)
        records = _completed(plan)
        timing = ExecutionTiming(plan.estimated_duration_ns)
        tokens = s.complete(Fence(fence), CompletionReport(records, timing))
        for handle in {t.handle for t in tokens}:
            s.published_output(handle, Fence(fence))
    for _ in range(num_requests - len(decoders)):
        s.admit(RequestSpec(3000, 200))
    s._last_fence = fence  # the next fence follows the warm-up's
    return s


def _tokens(role: LaneRole, max_advance_tokens: int) -> tuple[int, ...]:
    if role is LaneRole.PROMPT:
        return (1,) * max_advance_tokens
    if role is LaneRole.DECODE:
        return (1,)
    return ()  # state operations (init, restore, snapshots) commit no tokens


def _completed(plan: ScheduledPlan) -> list[CompletionRecord]:
    """Records completing ``plan`` as estimated: whole prompt chunks, one token per
    decode row, none for a state operation's rows."""
    return [
        CompletionRecord(
            lane.handle, lane.num_prompt_tokens, _tokens(lane.role, lane.max_advance_tokens)
        )
        for lane in plan.lanes
    ]


def queue_decode_frame(s: Scheduler) -> None:
    """Commit the best fresh decode-only candidate, leaving it in flight: the state the
    runtime plans in while a frame executes."""
    state = s.selection_state()
    evaluation = Exhaustive().evaluate(state)
    candidates, decision = evaluation.inference, evaluation.decision
    queueable = [
        c
        for c in candidates
        if c.descriptor.kind in QUEUEABLE_KINDS and c.freshness is Freshness.FRESH
    ]
    best = select(queueable)
    if best is None:
        raise RuntimeError("no fresh decode candidate to queue")
    plan = s._freeze(best, decision, state.start_ns, False, 0.0, ExecutionClass.ORDINARY)
    s.commit(plan, Fence(s._last_fence + 1))


def complete_head(s: Scheduler, rng: random.Random) -> None:
    """Complete the oldest frame: one token per decode lane, whole chunks for prompt rows,
    every output published, a device time within 3% of the estimate (as a real device
    varies, so the cost medians move)."""
    frame = s.queue.head()
    plan = frame.plan
    s.advance_to(max(s.now_ns, frame.expected_end_ns))
    records = _completed(plan)
    timing = ExecutionTiming(round(plan.estimated_duration_ns * rng.uniform(0.97, 1.03)))
    fence = Fence(frame.fence)
    d = plan.descriptor
    if d.is_device_allocated:
        records = [replace(r, num_verified_tokens=len(r.token_ids)) for r in records]
        plane = tuple((0.5,) * d.proposal_depth for _ in range(d.batch_capacity))
        report = CompletionReport(records, timing, ConfidenceSidecar((plane, plane)))
    else:
        report = CompletionReport(records, timing)
    tokens = s.complete(fence, report)
    for handle in {t.handle for t in tokens}:
        s.published_output(handle, fence)


def measure_loop(
    num_requests: int,
    iterations: int = 2000,
    mode: str = "adaptive",
    initialize: bool = True,
    policy: PolicyConfig | None = None,
) -> dict[str, tuple[float, float]]:
    """plan() as the engine calls it: after each commit or completion, with the previous
    frame still queued where the winner may queue. Finished requests are replaced."""
    catalog, speculation = runtime_catalog(mode, initialize)
    s = prepared(catalog, num_requests, speculation, policy)
    queue_decode_frame(s)
    rng = random.Random(14)
    wall, cpu = [], []
    for _ in range(iterations):
        start, start_cpu = time.perf_counter_ns(), time.process_time_ns()
        plan = s.plan()
        wall.append((time.perf_counter_ns() - start) / 1000)
        cpu.append((time.process_time_ns() - start_cpu) / 1000)
        if plan is not None:
            s.commit(plan, Fence(s._last_fence + 1))
        if plan is None or len(s.queue) > 1:
            complete_head(s, rng)
        for _ in range(num_requests - sum(1 for r in s.requests.values() if r.is_live)):
            s.admit(RequestSpec(3000, 200))
    return {
        "wall": _percentiles(wall),
        "cpu": _percentiles(cpu),
        "programs": len(s.descriptors) + len(s.state_descriptors),
    }


# The phases of one plan(), as the bounded selector (helios/fast/selector.py) names them.
PHASES = (
    "build_population",
    "active_descriptors",
    "largest_bound",
    "bounded_candidates",
    "stale_alternative",  # timing refresh's alternative, only when its credit is full
    "state_candidates",  # the exhaustive state search, only when the winner lacks pages
    "choose_probe",
)
# The state search's steps (helios/fast/state_search.py), timed as methods.
SEARCH_PHASES = ("__init__", "provisional", "candidates")


def phase_timers() -> tuple[dict[str, list[float]], Callable[[], None]]:
    """Wrap each of ``PHASES`` in helios.fast.selector (and TableCache.tables) with a CPU
    timer; returns the samples (us per call) and a function that unwraps them. For the
    next optimisation pass: which phase the commit loop's time goes to."""
    from ignition.helios.fast import selector
    from ignition.helios.fast.state_search import StateSearch
    from ignition.helios.fast.tables import TableCache

    originals = [(selector, name, getattr(selector, name), name) for name in PHASES]
    originals.append((TableCache, "tables", TableCache.tables, "tables"))
    originals += [
        (StateSearch, name, getattr(StateSearch, name), f"state search {name.strip('_')}")
        for name in SEARCH_PHASES
    ]
    samples: dict[str, list[float]] = {label: [] for *_, label in originals}

    def timed(label: str, f: Callable) -> Callable:
        def call(*args, **kwargs):
            start = time.process_time_ns()
            try:
                return f(*args, **kwargs)
            finally:
                samples[label].append((time.process_time_ns() - start) / 1000)

        return call

    for owner, name, f, label in originals:
        setattr(owner, name, timed(label, f))

    def restore() -> None:
        for owner, name, f, _ in originals:
            setattr(owner, name, f)

    return samples, restore


def _percentiles(samples: list[float]) -> tuple[float, float]:
    samples = sorted(samples)
    return statistics.median(samples), samples[int(0.99 * (len(samples) - 1))]


def measure(
    num_requests: int,
    iterations: int = 2000,
    mode: str = "adaptive",
    queued: bool = False,
    initialize: bool = True,
    policy: PolicyConfig | None = None,
) -> dict[str, tuple[float, float]]:
    """Wall and process-CPU percentiles of plan() in one state."""
    catalog, speculation = runtime_catalog(mode, initialize)
    s = prepared(catalog, num_requests, speculation, policy)
    if queued:
        queue_decode_frame(s)
    wall, cpu = [], []
    for i in range(iterations):
        s.advance_to(s.now_ns + 1000 * (i % 3))
        start, start_cpu = time.perf_counter_ns(), time.process_time_ns()
        s.plan()
        wall.append((time.perf_counter_ns() - start) / 1000)
        cpu.append((time.process_time_ns() - start_cpu) / 1000)
    return {
        "wall": _percentiles(wall),
        "cpu": _percentiles(cpu),
        "programs": len(s.descriptors) + len(s.state_descriptors),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object per case")
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
    parser.add_argument(
        "--loop", action="store_true", help="also time plan() inside a commit/complete loop"
    )
    parser.add_argument(
        "--phases",
        action="store_true",
        help="only the commit loop, with per-phase CPU time (calls per plan, p50, p99, mean)",
    )
    parser.add_argument(
        "--without-init",
        action="store_true",
        help="leave the init program out of the catalog (fresh requests start ready)",
    )
    parser.add_argument(
        "--preset",
        default="balanced",
        choices=list(PRESETS),
        help="the scheduler policy preset (balanced: the figures recorded before issue 40; "
        f"the serving default is {DEFAULT_PRESET})",
    )
    args = parser.parse_args(argv)
    initialize = not args.without_init
    policy = policy_from_preset(args.preset)
    if args.phases:
        for mode in args.modes:
            for n in args.sizes:
                samples, restore = phase_timers()
                try:
                    r = measure_loop(n, args.iterations, mode, initialize, policy)
                finally:
                    restore()
                c50, c99 = r["cpu"]
                print(
                    f"commit loop, {n} requests, {mode}: "
                    f"plan() cpu p50 {c50:.1f} us p99 {c99:.1f} us"
                )
                for name, values in samples.items():
                    if values:
                        p50, p99 = _percentiles(values)
                        print(
                            f"  {name:>18}: {len(values) / args.iterations:4.2f} calls/plan, "
                            f"p50 {p50:7.1f} us p99 {p99:7.1f} us, "
                            f"mean per plan {sum(values) / args.iterations:7.1f} us"
                        )
        return
    for mode in args.modes:
        for queued in (False, True, "loop") if args.loop else (False, True):
            for n in args.sizes:
                if queued == "loop":
                    r = measure_loop(n, args.iterations, mode, initialize, policy)
                else:
                    r = measure(n, args.iterations, mode, queued, initialize, policy)
                (w50, w99), (c50, c99) = r["wall"], r["cpu"]
                if args.json:
                    print(
                        json.dumps(
                            {
                                "preset": args.preset,
                                "mode": mode,
                                "queued_frames": "loop" if queued == "loop" else int(queued),
                                "active_requests": n,
                                "programs": r["programs"],
                                "cpu_p50_us": round(c50, 1),
                                "cpu_p99_us": round(c99, 1),
                                "wall_p50_us": round(w50, 1),
                                "wall_p99_us": round(w99, 1),
                            }
                        )
                    )
                    continue
                queue = {False: "empty queue", True: "queued frame", "loop": "commit loop"}[queued]
                print(
                    f"plan() with {n:>2} active requests ({queue}): {mode:>8} decode, "
                    f"{r['programs']} programs | wall p50 {w50:7.1f} us p99 {w99:7.1f} us | "
                    f"cpu p50 {c50:7.1f} us p99 {c99:7.1f} us"
                )


if __name__ == "__main__":
    main()
