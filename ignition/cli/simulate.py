"""``ignition simulate``: Helios and baselines against a device model on a trace, a
scenario file or multi-turn conversations; no model, no torch. The flags fill one
:class:`~ignition.simulate.options.SimulateOptions`, checked when built, and
:func:`ignition.simulate.runner.run` is the one entry point."""

from __future__ import annotations

import sys
from typing import Any

import click

from ignition.cli.errors import UserError
from ignition.cli.registry import Command


def run(**params: Any) -> None:
    """Simulate Helios and baselines against a device model on a trace, a scenario file or
    multi-turn conversations; no model, no torch."""
    from ignition.simulate.command import CommandError
    from ignition.simulate.options import SimulateOptions
    from ignition.simulate.runner import run as simulate

    try:
        options = SimulateOptions(**params)
    except CommandError as err:
        raise UserError(str(err)) from None
    status = simulate(options)
    if status:
        sys.exit(status)


OPTIONS = (
    click.option(
        "--scenario",
        type=click.Path(exists=True, dir_okay=False),
        help="Scenario YAML: its requests, catalog and durations, Helios and the policies it "
        "names (see examples/scenarios/).",
    ),
    click.option("--trace", help="Trace CSV (TIMESTAMP, ContextTokens, GeneratedTokens)."),
    click.option("--rows", default="0:600", show_default=True, help="Trace window START:END."),
    click.option("--rate", type=float, help="Load: the window's arrival rate scale."),
    click.option("--sweep", help="Comma-separated loads: every policy at each."),
    click.option("--capacity", is_flag=True, help="SLO capacity search per --slo pair."),
    click.option(
        "--slo",
        default="60:2,100:5,200:10",
        show_default=True,
        help="p99 TBT ms : p99 TTFT s pairs for --capacity ('-' for a TBT that does not bind).",
    ),
    click.option(
        "--compare",
        default=None,
        help="Policies beside Helios: vllm, vllm-dyn, vllm-adaptive, sglang-tiers, sarathi, "
        "prefill-first, with -bBUDGET / -kDRAFTS / -padded. Default: vllm,vllm-k3,sarathi "
        "on a trace; none beside a scenario's policies or Helios's multi-turn rows.",
    ),
    click.option("--slots", type=int, default=32, show_default=True, help="Request slots."),
    click.option(
        "--speculative-token-capacity",
        "envelope",
        type=int,
        default=128,
        show_default=True,
        help="Helios catalog's target-token envelope R.",
    ),
    click.option(
        "--device",
        default="h200",
        show_default=True,
        help="A profile (qwen38-flash-next-h200, qwen38-flash-next-4xh100, qwen38-27b-dense-h200; "
        "docs/devices.md), h200 (the earlier roofline) or measured:PATH.",
    ),
    click.option(
        "--tasks",
        default=None,
        help="Acceptance by task: a mix name (conv, code, random) or task:weight,... of "
        "random, chat, code, math (replaces --acceptance).",
    ),
    click.option(
        "--confidence",
        default="perfect",
        show_default=True,
        help="Drafter confidence calibration read by adaptive policies: perfect, eagle2, weak.",
    ),
    click.option(
        "--acceptance",
        default="0.8,0.7,0.6,0.5,0.4",
        show_default=True,
        help="Per-position conditional MTP acceptance.",
    ),
    click.option("--max-prompt", type=int, help="Cap on prompt tokens."),
    click.option("--max-output", type=int, help="Cap on output tokens."),
    click.option("--seed", type=int, default=0, show_default=True),
    click.option("--json", "as_json", is_flag=True, help="Print the numbers as JSON."),
    click.option("--plot", "plot_dir", help="Write PNG plots into this folder (matplotlib)."),
    click.option(
        "--trace-file",
        help="Write the Helios run's frames, requests and counters as Chrome trace-event / "
        "Perfetto JSON (the format `ignition serve --trace-file` writes; one load only).",
    ),
    click.option(
        "--conversations",
        type=click.IntRange(min=1),
        help="Multi-turn chat instead of a trace: this many conversations, Helios with retention "
        "on and off and any --compare baselines on the same closed-loop turns.",
    ),
    click.option("--turns", type=click.IntRange(min=1), default=4, show_default=True),
    click.option(
        "--snapshot-rows",
        default="0,4,16",
        show_default=True,
        help="With --conversations: retained-checkpoint row counts to compare (0: off).",
    ),
    click.option(
        "--conversation-rate",
        type=float,
        default=4.0,
        show_default=True,
        help="With --conversations: conversations starting per second (Poisson).",
    ),
    click.option("--first-prompt", type=int, default=1024, show_default=True),
    click.option("--turn-prompt", type=int, default=128, show_default=True),
    click.option("--turn-output", type=int, default=64, show_default=True),
    click.option(
        "--think-ms",
        type=float,
        default=1000.0,
        show_default=True,
        help="With --conversations: mean time between a reply and the next turn.",
    ),
    click.option(
        "--scheduler-first-delivery",
        type=float,
        default=None,
        help="With --conversations: weight on the first-delivery credit of the chunk that "
        "finishes a prompt (PolicyConfig.first_delivery; 0: off, 1: on).",
    ),
    click.option(
        "--scheduler-checkpoint-payoff/--no-scheduler-checkpoint-payoff",
        default=True,
        show_default=True,
        help="With --conversations: restore and capture checkpoints only where they save more "
        "prefill time than they cost (docs/scheduling.md).",
    ),
)

COMMAND = Command(name="simulate", options=OPTIONS, run=run, clean_errors=False)
