"""``ignition simulate``: one runner for ``--conversations``, ``--scenario`` and
``--trace`` (in that order of precedence); bad input is one line on stderr naming the
option, file key or value, exit status 2 (docs/simulate.md, "runner.py")."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from ignition.helios import PolicyConfig
from ignition.simulate.acceptance import confidence_noise
from ignition.simulate.command import (
    ERRORS,
    CommandError,
    TraceSpec,
    execute,
    parse_rows,
    policy_list,
)
from ignition.simulate.harness import Setup
from ignition.simulate.options import SimulateOptions
from ignition.simulate.ple_charge import device_with_ple
from ignition.simulate.workloads import AcceptanceModel

DEFAULT_COMPARE = "vllm,vllm-k3,sarathi"  # the trace path's baselines when --compare is not given


def run(options: SimulateOptions) -> int:
    """``ignition simulate``'s one entry point: the workload ``options`` names
    (``conversations``, ``scenario``, ``trace``, in that order of precedence), every policy
    through the harness; returns the exit status. Bad input is one line on stderr naming
    it."""
    import sys

    from rich.console import Console

    from ignition.simulate.scenario import ScenarioError

    console = Console() if sys.stdout.isatty() else Console(width=170)
    as_json = options.as_json

    def echo(item: Any) -> None:
        if as_json:
            print(item)
        elif isinstance(item, str):
            console.print(item, markup=False, highlight=False)
        else:
            console.print(item)

    try:
        recorder = trace_recorder(options)
        if options.conversations is not None:
            from ignition.simulate import retention_command
            from ignition.simulate.multiturn_turns import MultiTurnSpec, parse_rows_list

            spec = MultiTurnSpec(
                conversations=options.conversations,
                turns=options.turns,
                rate_per_s=options.conversation_rate,
                first_prompt=options.first_prompt,
                turn_prompt=options.turn_prompt,
                output_tokens=options.turn_output,
                think_ms=options.think_ms,
                seed=options.seed,
            )
            policy = PolicyConfig()
            if options.scheduler_first_delivery is not None:
                policy = replace(policy, first_delivery=options.scheduler_first_delivery)
            retention_command.execute(
                spec=spec,
                snapshot_rows=parse_rows_list(options.snapshot_rows),
                setup=Setup(
                    slots=options.slots,
                    speculative_token_capacity=options.envelope,
                    device=device_with_ple(options.device),
                    seed=options.seed,
                    noise_sigma=0.0,  # the multi-turn worker times frames without noise
                    helios_policy=policy,
                ),
                policies=policy_list(options.compare or ""),
                payoff=options.scheduler_checkpoint_payoff,
                as_json=as_json,
                echo=echo,
            )
            return 0
        if options.scenario is not None:
            from ignition.simulate import scenario_command

            scenario_command.execute(
                path=options.scenario,
                compare=policy_list(options.compare or "", with_helios=False),
                as_json=as_json,
                echo=echo,
            )
            return 0
        if options.trace is None:
            raise CommandError("give --scenario FILE, --trace FILE or --conversations N")
        if options.rate is not None and (not math.isfinite(options.rate) or options.rate <= 0):
            raise CommandError(f"--rate = {options.rate:g}: must be a positive load scale")
        start, count = parse_rows(options.rows)
        spec = TraceSpec(
            options.trace,
            start,
            count,
            options.max_prompt,
            options.max_output,
            AcceptanceModel.parse(options.acceptance),
            options.seed,
            options.tasks,
        )
        setup = Setup(
            slots=options.slots,
            speculative_token_capacity=options.envelope,
            device=device_with_ple(options.device),  # h200+ple:disk charges PLE delivery
            seed=options.seed,
            confidence_noise=confidence_noise(options.confidence),
            trace=recorder,
        )
        execute(
            spec=spec,
            setup=setup,
            policies=options.compare or DEFAULT_COMPARE,
            rate=options.rate,
            sweep=options.sweep,
            capacity=options.capacity,
            slos=options.slo,
            as_json=as_json,
            plot_dir=options.plot_dir,
            echo=echo,
            show_progress=sys.stderr.isatty(),
        )
        if recorder is not None and options.trace_file is not None:
            from ignition.runtime.tracing.writer import write_trace

            write_trace(recorder, options.trace_file)
            if not as_json:
                echo(f"trace: {options.trace_file} (open it in ui.perfetto.dev)")
    except (*ERRORS, CommandError, ScenarioError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # a setup the catalog rules reject (slots, R)
        from ignition.components.capacity import CapacityError
        from ignition.helios import SchedulerError

        if isinstance(err, (CapacityError, SchedulerError)):
            print(f"error: {err}", file=sys.stderr)
            return 2
        raise
    return 0


def trace_recorder(options: SimulateOptions):
    """A recorder for ``--trace-file`` (None without it): the trace path's one Helios run;
    a sweep or capacity search runs Helios at many loads, which one file cannot tell apart."""
    if options.trace_file is None:
        return None
    from ignition.runtime.tracing.recorder import TraceRecorder
    from ignition.runtime.tracing.writer import check_trace_path

    if options.sweep or options.capacity:
        raise CommandError("--trace-file records one run: give --rate, not --sweep or --capacity")
    if options.conversations is not None or options.scenario is not None:
        raise CommandError("--trace-file records the --trace path's Helios run only")
    try:
        check_trace_path(options.trace_file)
    except ValueError as err:
        raise CommandError(str(err)) from None
    return TraceRecorder()
