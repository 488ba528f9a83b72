"""Options shared by ``generate``, ``serve`` and ``debug-serve``: the bundle and how the
runtime decodes it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from ignition.cli.checks import check_range
from ignition.cli.device_options import (
    DeviceArgs,
    device_option,
    tensor_parallel_options,
    threads_option,
)
from ignition.cli.registry import Decorator
from ignition.recipes import INDEXER_KV_DTYPES, SPECULATION_MODES


def indexer_kv_dtype_option(default_help: str) -> Decorator:
    """``--indexer-kv-dtype`` (vLLM's ``indexer_kv_dtype``): storage of QSA's compressed
    index keys; build and the serving commands."""
    return click.option(
        "--indexer-kv-dtype",
        type=click.Choice(INDEXER_KV_DTYPES),
        help="Storage of QSA's compressed index keys: auto (the model's dtype), bf16, or fp8 "
        f"(e4m3: half the indexer cache and reads, a small score error; {default_help}). "
        "Models without QSA layers accept it and change nothing.",
    )


def runtime_options(artifacts_required: bool = True) -> list[Decorator]:
    """``serve`` also takes PATH, so its ``--artifacts`` is optional."""
    return [
        click.option(
            "--artifacts",
            required=artifacts_required,
            # existence is checked after every other flag (serve_path.classify), so that a
            # bad value of another flag is named whatever the path
            type=click.Path(file_okay=False),
            help="A bundle written by `ignition build`"
            + ("." if artifacts_required else " (or give it, or a checkpoint, as PATH)."),
        ),
        click.option(
            "--speculation",
            type=click.Choice(SPECULATION_MODES),
            help="Decode mode (default: the bundle's).",
        ),
        click.option("--no-mixed", is_flag=True, help="Do not use mixed prompt/decode programs."),
        click.option(
            "--max-context",
            "--max-model-len",
            "max_context",
            type=int,
            help="Context limit per request in tokens (prompt + output); "
            "default: the model's, at most 8192.",
        ),
        device_option(),
        threads_option("default: 1"),
        click.option(
            "--verify-weights",
            is_flag=True,
            help="Hash the checkpoint again (default: compare sizes and modification times).",
        ),
        *tensor_parallel_options(),
        indexer_kv_dtype_option("default: the bundle's"),
    ]


@dataclass(frozen=True)
class RuntimeArgs:
    """The bundle to load (None: serve's PATH names it), the decode mode (None: the
    bundle's), mixed programs on or off, the context limit, where the model runs and how
    QSA's index keys are stored (None: the bundle's)."""

    artifacts: str | None
    speculation: str | None
    mixed: bool
    max_context: int | None
    verify_weights: bool
    placement: DeviceArgs
    indexer_kv_dtype: str | None = None  # None: the bundle's

    def __post_init__(self) -> None:
        check_range("--max-context", self.max_context, 2)

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> RuntimeArgs:
        """Take (pop) this group's flags out of a command's keyword arguments."""
        return cls(
            artifacts=params.pop("artifacts"),
            speculation=params.pop("speculation"),
            mixed=not params.pop("no_mixed"),
            max_context=params.pop("max_context"),
            verify_weights=params.pop("verify_weights"),
            placement=DeviceArgs.from_params(params),
            indexer_kv_dtype=params.pop("indexer_kv_dtype"),
        )
