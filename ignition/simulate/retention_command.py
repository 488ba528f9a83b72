"""``ignition simulate --conversations N ...``: a multi-turn chat workload with checkpoint
retention at each ``--snapshot-rows`` count (0 is off), one table row per count.

Every run serves the same conversations with the same replies (the simulated worker
emits planned tokens), so the rows differ only in what retention saves: restored
prompt tokens, the prefill they no longer need, and the later turns' time to first
token. Bad input is one line naming the option.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from typing import Any

from ignition.simulate.devices import DeviceError, device_from_spec
from ignition.simulate.multiturn import (
    MultiTurnSpec,
    parse_rows_list,
    retention_table,
    run_retention,
)
from ignition.simulate.workloads import WorkloadError


def main(
    *,
    conversations: int,
    turns: int,
    snapshot_rows: str,
    conversation_rate: float,
    first_prompt: int,
    turn_prompt: int,
    turn_output: int,
    think_ms: float,
    slots: int,
    device: str,
    seed: int,
    as_json: bool,
    scheduler_first_delivery: float | None = None,
    scheduler_checkpoint_payoff: bool = True,
) -> int:
    """Returns the exit status."""
    from rich.console import Console

    from ignition.components.capacity import CapacityError
    from ignition.helios.config import PolicyConfig
    from ignition.helios.types import SchedulerError
    from ignition.simulate.harness import helios_catalog

    try:
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
        rows = parse_rows_list(snapshot_rows)
        model = device_from_spec(device)
        catalog = helios_catalog("qwen38", slots, 128, speculation="off")
        policy = PolicyConfig()
        if scheduler_first_delivery is not None:
            policy = replace(policy, first_delivery=scheduler_first_delivery)
        runs = [
            run_retention(
                spec,
                r,
                catalog,
                slots=slots,
                device=model,
                policy=policy,
                payoff=scheduler_checkpoint_payoff,
            )
            for r in rows
        ]
    except (WorkloadError, DeviceError, CapacityError, SchedulerError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    title = (
        f"{conversations} conversations x {turns} turns ({first_prompt}-token first prompt, "
        f"{turn_prompt}-token turns, {turn_output}-token replies, think {think_ms:g} ms), "
        f"{slots} slots, device {model.name}; TTFT and TPOT in ms"
    )
    if as_json:
        report: dict[str, Any] = {"workload": spec.__dict__, "slots": slots, "device": model.name}
        report["runs"] = [run.to_json() for run in runs]
        print(json.dumps(report, indent=2))
        return 0
    console = Console() if sys.stdout.isatty() else Console(width=170)
    console.print(retention_table(runs, title))
    return 0
