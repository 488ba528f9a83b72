"""``serve``'s Helios options: the policy preset and its overrides, checkpoint payoff,
retained snapshot rows, KV pages, vision windows, MTP verification and the wait queue."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import click

from ignition.cli.checks import (
    check_finite_nonnegative,
    check_finite_positive,
    check_range,
    parse_row_count,
)
from ignition.cli.errors import UserError
from ignition.cli.registry import Decorator
from ignition.runtime.loop.second_slot import DEFAULT_QUEUE_LEAD_MS

DEFAULT_POLICY = "objective"  # ignition.helios.config.DEFAULT_PRESET (Helios never imports click)


def parse_lead_ms(text: str | None) -> float | None:
    """--scheduler-queue-lead-ms: milliseconds, or "off" (None: fill the slot at once)."""
    if text is None or text.strip().lower() == "off":
        return None
    try:
        return float(text)
    except ValueError:
        raise UserError(
            f"--scheduler-queue-lead-ms = {text!r}: expected milliseconds or 'off'"
        ) from None


def scheduler_options() -> list[Decorator]:
    return [
        click.option(
            "--scheduler-policy",
            type=click.Choice(["objective", "flat-cadence", "balanced", "throughput"]),
            default=DEFAULT_POLICY,
            show_default=True,
            help="Helios preset: objective (the balanced coefficients with prompt chunks "
            "sized to a 75 ms TBT target and decoders' delivery and age prices rising as "
            "they near it); flat-cadence (the objective preset before that ramp); "
            "balanced (the seed's) weighs latency and throughput; throughput favours "
            "tokens per second.",
        ),
        click.option(
            "--scheduler-terminal-value",
            type=float,
            help="Value per terminal retirement, prompt-token units (overrides the preset's "
            "256; 0 disables).",
        ),
        click.option(
            "--scheduler-terminal-age-price",
            type=float,
            help="Terminal-wait cost coefficient, value/ms^2 (overrides the preset's 1; 0 "
            "disables).",
        ),
        click.option(
            "--scheduler-checkpoint-extra-work-fraction",
            type=float,
            default=0.05,
            show_default=True,
            help="Checkpoint extras (prefill splits, snapshot copies) per unit of uncached "
            "prefill.",
        ),
        click.option(
            "--scheduler-checkpoint-payoff/--no-scheduler-checkpoint-payoff",
            default=True,
            show_default=True,
            help="Restore and capture checkpoints only where they save more prefill time than "
            "they cost (docs/scheduling.md); off: every restore and capture the allowance "
            "admits.",
        ),
        click.option(
            "--snapshot-rows",
            default=None,
            metavar="N",
            help="Retained-checkpoint snapshot rows for prefix caching (0: off). Default: 4 per "
            "request slot, at most half the free GPU memory; each row holds a slot's state and "
            "pages.",
        ),
        click.option(
            "--kv-pages",
            type=int,
            help="KV pages requests may own (default: enough for every slot to reach the "
            "context limit). With fewer, a full pool preempts the newest request; it resumes "
            "later.",
        ),
        click.option(
            "--vision-feature-capacity",
            type=int,
            default=0,
            show_default=True,
            help="Image features one request's vision window holds; images beyond it are served "
            "in further windows through a private snapshot (0: the largest prompt chunk).",
        ),
        click.option(
            "--mtp-adaptive-verification-alpha",
            type=float,
            help="Smoothing of adaptive speculative verification widths (overrides the preset).",
        ),
        click.option(
            "--scheduler-queue-lead-ms",
            default=str(DEFAULT_QUEUE_LEAD_MS),
            show_default=True,
            metavar="MS|off",
            help="With one frame on the GPU, plan the next this long before that frame is "
            "expected to end, so a request arriving meanwhile rides in it (docs/scheduling.md, "
            "\"Just-in-time second frame slot\"); off: plan it at once. CPU serving plans "
            "each frame after the last one ends either way.",
        ),
        click.option(
            "--max-waiting",
            type=int,
            default=64,
            show_default=True,
            help="Requests that may wait for a slot, beyond the free slots, before new ones get "
            "503.",
        ),
    ]


@dataclass(frozen=True)
class SchedulerArgs:
    """The Helios preset with its overrides, and the serve-time capacities the scheduler
    plans with (None: the runtime's default)."""

    policy_name: str = DEFAULT_POLICY
    terminal_value: float | None = None
    terminal_age_price: float | None = None
    checkpoint_extra_work_fraction: float = 0.05
    checkpoint_payoff: bool = True
    snapshot_rows: int | None = None
    num_pages: int | None = None
    vision_feature_capacity: int = 0
    adaptive_verification_alpha: float | None = None
    max_waiting: int = 64
    queue_lead_ms: float | None = DEFAULT_QUEUE_LEAD_MS

    def __post_init__(self) -> None:
        check_finite_nonnegative("--scheduler-terminal-value", self.terminal_value)
        check_finite_nonnegative("--scheduler-terminal-age-price", self.terminal_age_price)
        check_finite_nonnegative(
            "--scheduler-checkpoint-extra-work-fraction", self.checkpoint_extra_work_fraction
        )
        check_range("--kv-pages", self.num_pages, 1)
        check_finite_nonnegative("--vision-feature-capacity", self.vision_feature_capacity)
        check_range("--max-waiting", self.max_waiting, 0)
        check_finite_nonnegative("--scheduler-queue-lead-ms", self.queue_lead_ms)
        check_finite_positive("--mtp-adaptive-verification-alpha", self.adaptive_verification_alpha)

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> SchedulerArgs:
        """Take (pop) this group's flags out of a command's keyword arguments."""
        return cls(
            policy_name=params.pop("scheduler_policy"),
            terminal_value=params.pop("scheduler_terminal_value"),
            terminal_age_price=params.pop("scheduler_terminal_age_price"),
            checkpoint_extra_work_fraction=params.pop("scheduler_checkpoint_extra_work_fraction"),
            checkpoint_payoff=params.pop("scheduler_checkpoint_payoff"),
            snapshot_rows=parse_row_count("--snapshot-rows", params.pop("snapshot_rows")),
            num_pages=params.pop("kv_pages"),
            vision_feature_capacity=params.pop("vision_feature_capacity"),
            adaptive_verification_alpha=params.pop("mtp_adaptive_verification_alpha"),
            max_waiting=params.pop("max_waiting"),
            queue_lead_ms=parse_lead_ms(params.pop("scheduler_queue_lead_ms")),
        )

    def with_prefix_caching(self, enabled: bool | None) -> SchedulerArgs:
        """--[no-]enable-prefix-caching as --snapshot-rows (0: off; None: the default
        rows); both given and disagreeing is a one-line error."""
        if enabled is None:
            return self
        if not enabled:
            if self.snapshot_rows:
                raise UserError(
                    f"--no-enable-prefix-caching with --snapshot-rows = {self.snapshot_rows}: "
                    "prefix caching is the snapshot rows; pick one"
                )
            return replace(self, snapshot_rows=0)
        if self.snapshot_rows == 0:
            raise UserError("--enable-prefix-caching with --snapshot-rows = 0: pick one")
        return self

    def policy(self) -> Any:
        """The PolicyConfig the engine gets: the preset, then the overrides."""
        from ignition.helios import SchedulerError, policy_from_preset

        try:
            return policy_from_preset(
                self.policy_name,
                terminal_value=self.terminal_value,
                terminal_age_price=self.terminal_age_price,
                adaptive_verification_alpha=self.adaptive_verification_alpha,
            )
        except SchedulerError as err:
            raise UserError(str(err)) from None

    def serve_fields(self) -> dict[str, Any]:
        """This group's ServeOptions fields."""
        return {
            "policy": self.policy(),
            "max_waiting": self.max_waiting,
            "queue_lead_ms": self.queue_lead_ms,
            "checkpoint_extra_work_fraction": self.checkpoint_extra_work_fraction,
            "checkpoint_payoff": self.checkpoint_payoff,
            "snapshot_rows": self.snapshot_rows,
            "num_pages": self.num_pages,
            "vision_feature_capacity": self.vision_feature_capacity,
        }
