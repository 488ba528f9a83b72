"""``ignition simulate``: one runner for its three workloads, every policy through the
harness (``harness.py``): ``--conversations`` (``retention_command.py``), ``--scenario``
(``scenario_command.py``) and ``--trace`` (``command.py``), in that order of precedence.
They share the setup flags, the policy list (``--compare``), the output (rich tables or
``--json`` on stdout) and the error handling: bad input is one line on stderr naming
the option, file key or value, exit status 2.
"""

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
from ignition.simulate.ple_charge import device_with_ple
from ignition.simulate.workloads import AcceptanceModel

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
        from ignition.helios import SchedulerError

        if isinstance(err, (CapacityError, SchedulerError)):
            print(f"error: {err}", file=sys.stderr)
            return 2
        raise
    return 0
