"""Recipe selection and the load-time capacity options (``catalog`` and ``build``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from ignition.cli.registry import Decorator
from ignition.recipes import SPECULATION_MODES, LoadOptions


def _bucket_list(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[int, ...] | None:
    """'2048,4096' -> (2048, 4096); '' -> (); unset -> None (the recipe's)."""
    if value is None:
        return None
    try:
        return tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise click.BadParameter(f"{value!r}: expected comma-separated integers") from None


def capacity_options(recipe_help: str | None = None) -> list[Decorator]:
    """The load-time options shared by ``catalog`` and ``build``; ``recipe_help`` set makes
    ``--recipe`` optional (``build`` can take it from the checkpoint)."""
    return [
        click.option(
            "--recipe",
            "recipe_name",
            required=recipe_help is None,
            help=recipe_help or "Recipe name, alias (qwen3.8-flash) or path to a recipe.yaml.",
        ),
        click.option(
            "--mixed-prefill",
            is_flag=True,
            help="Add mixed prompt/decode programs (recipes that declare mixed capture).",
        ),
        click.option(
            "--concurrency",
            type=int,
            help="Request slots (default: the recipe's; at most its capacity.maxima).",
        ),
        click.option(
            "--speculative-token-capacity",
            type=int,
            help="Target-token envelope R for wider speculative programs (up to capacity.maxima).",
        ),
        click.option("--num-draft-tokens", type=int, help="MTP draft tokens D (0: ordinary)."),
        click.option(
            "--max-prefill-chunk",
            type=int,
            help="Largest prompt bucket to prepare (one of the recipe's buckets).",
        ),
        click.option(
            "--speculation",
            type=click.Choice(SPECULATION_MODES),
            help="off: none; fixed: host-allocated; adaptive: adds device-allocated.",
        ),
        click.option(
            "--mixed-wide-prompt-buckets",
            callback=_bucket_list,
            help="Comma-separated prompt buckets at which every wider mixed width is also "
            "prepared ('' for the seed's one balanced bucket; default: the recipe's).",
        ),
        click.option(
            "--batch-bucket-step",
            type=int,
            help="Decode and speculative batch buckets: 0 for powers of two, 8 for 1, 2, 4 "
            "and every multiple of 8 (vLLM's capture sizes; default: the recipe's).",
        ),
    ]


@dataclass(frozen=True)
class RecipeArgs:
    """``--recipe`` (None: the checkpoint's) and the capacity overrides; the overrides are
    checked against the recipe's maxima when the catalog is planned (``CapacityError``)."""

    recipe_name: str | None
    load: LoadOptions

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> RecipeArgs:
        """Take (pop) this group's flags out of a command's keyword arguments."""
        load = LoadOptions(
            mixed_prefill=params.pop("mixed_prefill"),
            concurrency=params.pop("concurrency"),
            speculative_token_capacity=params.pop("speculative_token_capacity"),
            num_draft_tokens=params.pop("num_draft_tokens"),
            max_prefill_chunk=params.pop("max_prefill_chunk"),
            speculation=params.pop("speculation"),
            mixed_wide_prompt_buckets=params.pop("mixed_wide_prompt_buckets"),
            batch_bucket_step=params.pop("batch_bucket_step"),
        )
        return cls(params.pop("recipe_name"), load)
