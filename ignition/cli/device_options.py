"""Where the model runs: ``--device``, ``--threads`` and ``--tensor-parallel-size``
(build, generate, serve, debug-serve)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from ignition.cli.checks import check_device, check_range
from ignition.cli.registry import Decorator


def device_option() -> Decorator:
    return click.option("--device", help="torch device (default: cuda when available, else cpu).")


def threads_option(default_help: str) -> Decorator:
    return click.option("--threads", type=int, help=f"torch CPU threads ({default_help}).")


def tensor_parallel_options() -> list[Decorator]:
    """--tensor-parallel-size and its debug check (build takes only the size)."""
    return [
        click.option(
            "--tensor-parallel-size",
            "-tp",
            "tensor_parallel_size",
            type=int,
            default=1,
            show_default=True,
            help="Ranks that each hold a shard of every layer (one GPU each; gloo on CPU). "
            "Spawns the ranks, or joins torchrun's.",
        ),
        click.option(
            "--tensor-parallel-debug",
            is_flag=True,
            help="Check every frame's emitted tokens and committed state equal across ranks.",
        ),
    ]


@dataclass(frozen=True)
class DeviceArgs:
    """The torch device (None: cuda when available), CPU threads (None: torch's default
    for the command) and tensor-parallel ranks; a device this machine cannot use fails
    before any weights are read."""

    device: str | None = None
    threads: int | None = None
    tensor_parallel_size: int = 1
    tensor_parallel_debug: bool = False

    def __post_init__(self) -> None:
        check_device(self.device)
        check_range("--threads", self.threads, 1)
        check_range("--tensor-parallel-size", self.tensor_parallel_size, 1)

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> DeviceArgs:
        """Take (pop) this group's flags out of a command's keyword arguments."""
        return cls(
            params.pop("device"),
            params.pop("threads"),
            params.pop("tensor_parallel_size"),
            params.pop("tensor_parallel_debug", False),
        )
