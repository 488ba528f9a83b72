"""What ``ignition simulate`` is asked to run: every flag, with its default, in one frozen
dataclass checked when built. :func:`ignition.simulate.runner.run` takes it; the CLI and
tests build it the same way."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ignition.simulate.command import CommandError


@dataclass(frozen=True)
class SimulateOptions:
    """One simulation request. The workload is ``conversations`` (multi-turn chat), else
    ``scenario`` (a YAML file), else ``trace`` (a CSV), in that order of precedence; the
    remaining fields set up the catalog, the device, the acceptance model and the output.
    Values are kept as given on the command line (``rows``, ``slo``, ``snapshot_rows`` as
    text) and parsed by the workload that reads them."""

    scenario: str | None = None
    trace: str | None = None
    rows: str = "0:600"
    rate: float | None = None
    sweep: str | None = None
    capacity: bool = False
    slo: str = "60:2,100:5,200:10"
    compare: str | None = None
    slots: int = 32
    envelope: int = 128  # --speculative-token-capacity: the catalog's target-token envelope R
    device: str = "h200"
    tasks: str | None = None
    confidence: str = "perfect"
    acceptance: str = "0.8,0.7,0.6,0.5,0.4"
    max_prompt: int | None = None
    max_output: int | None = None
    seed: int = 0
    as_json: bool = False
    plot_dir: str | None = None
    trace_file: str | None = None  # the Helios run's frames as Perfetto JSON (runtime/tracing/)
    conversations: int | None = None
    turns: int = 4
    snapshot_rows: str = "0,4,16"
    conversation_rate: float = 4.0
    first_prompt: int = 1024
    turn_prompt: int = 128
    turn_output: int = 64
    think_ms: float = 1000.0
    scheduler_first_delivery: float | None = None
    scheduler_checkpoint_payoff: bool = True

    def __post_init__(self) -> None:
        _finite("--conversation-rate", self.conversation_rate, positive=True)
        _finite("--think-ms", self.think_ms)
        _finite("--scheduler-first-delivery", self.scheduler_first_delivery)


def _finite(flag: str, value: float | None, positive: bool = False) -> None:
    """A finite value, nonnegative (or positive); the error names the flag and the value."""
    if value is None or (math.isfinite(value) and (value > 0 if positive else value >= 0)):
        return
    sign = "positive" if positive else "nonnegative"
    raise CommandError(f"{flag} = {value!r}: must be finite and {sign}")
