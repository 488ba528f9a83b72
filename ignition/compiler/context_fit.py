"""A checkpoint's build fitted to the positions its model holds.

A build leaving prompt buckets to the recipe takes the largest that fits
``max_position_embeddings`` (and says so); a ``--max-prefill-chunk`` that does not fit is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ignition.components.capacity import CapacityError, plan_catalog
from ignition.recipes import LoadOptions, Recipe


@dataclass(frozen=True)
class ContextFit:
    """The options to build with, and the one line saying what was capped (None: nothing)."""

    options: LoadOptions
    note: str | None = None


def max_positions(checkpoint: Path) -> int:
    """config.json's ``max_position_embeddings`` as the family reads it (no weights read)."""
    from ignition.model.checkpoint_files import locate_tensors
    from ignition.model.config import read_config_json
    from ignition.model.families.registry import family_for_checkpoint

    family = family_for_checkpoint(checkpoint)
    config_path = checkpoint / "config.json"
    raw = read_config_json(config_path)
    tensors = frozenset(locate_tensors(checkpoint))
    return family.parse_config(raw, str(config_path), tensors).max_position_embeddings


def largest_extent(recipe: Recipe, options: LoadOptions) -> int:
    return plan_catalog(recipe, options).max_packed_extent()


def fit_to_context(recipe: Recipe, options: LoadOptions, limit: int, where: str) -> ContextFit:
    """``options`` if every program fits in ``limit`` positions, else at the largest fitting
    prompt bucket (with a note); CapacityError if the options named a larger one."""
    extent = largest_extent(recipe, options)
    if extent <= limit:
        return ContextFit(options)
    chunk = options.max_prefill_chunk or recipe.capacity.max_prefill_chunk
    fitting = [
        bucket
        for bucket in sorted(
            recipe.capacity.prompt_buckets_for(options.concurrency or recipe.capacity.concurrency),
            reverse=True,
        )
        if bucket < chunk
        and largest_extent(recipe, replace(options, max_prefill_chunk=bucket)) <= limit
    ]
    stated = f"{where}: max_position_embeddings = {limit}"
    if options.max_prefill_chunk is not None:
        fits = f"at most {fitting[0]}" if fitting else "no prompt bucket fits"
        raise CapacityError(
            f"--max-prefill-chunk = {chunk}: its programs pack up to {extent} tokens, beyond "
            f"{stated}; choose {fits}"
        )
    if not fitting:
        raise CapacityError(
            f"{stated}: even the smallest prompt bucket's programs of recipe {recipe.name} "
            "pack more tokens than the model's positions"
        )
    return ContextFit(
        replace(options, max_prefill_chunk=fitting[0]),
        f"{stated} is below the {extent} tokens recipe {recipe.name}'s largest program "
        f"packs: prompt buckets capped at {fitting[0]} (as --max-prefill-chunk {fitting[0]})",
    )


def fit_checkpoint_build(recipe: Recipe, options: LoadOptions, checkpoint: Path) -> ContextFit:
    """:func:`fit_to_context` at the checkpoint's ``max_position_embeddings``."""
    where = str(checkpoint / "config.json")
    return fit_to_context(recipe, options, max_positions(checkpoint), where)
