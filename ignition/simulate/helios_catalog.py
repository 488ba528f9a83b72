"""Helios's catalog in a simulated comparison: the recipe's programs for the slot count
and speculative token capacity, shaped by the catalog variants (``CATALOG_VARIANTS`` and
the parametric ones in ``baselines.py``), some of them what-if builds the real recipe
does not prepare (each says so). ``harness.helios_simulation`` is the caller."""

from __future__ import annotations

import functools
from dataclasses import replace

from ignition.components.capacity import plan_catalog, resolve
from ignition.components.catalog import Catalog
from ignition.components.mode_selection import select_for_mode
from ignition.components.program_kinds import GraphKind
from ignition.recipes import LoadOptions, get_recipe

# shape the recipe's catalog
CATALOG_VARIANTS = (
    "wide-mixed",
    "full-batch",
    "step8",
    "l1",
    "rec-lanes",
    "ragged",
    "seed-buckets",
    "seed-lanes",
    "seed-wide",
    "pow2-batches",
)
# helios+rec-lanes: the lanes the qwen38 recipe recommends (its capacity.prompt_lanes note)
RECOMMENDED_LANES = ((512, 4), (1024, 4), (2048, 2), (4096, 2))


@functools.lru_cache(maxsize=16)
def helios_catalog(
    recipe: str,
    slots: int,
    envelope: int,
    speculation: str = "adaptive",
    wide_mixed: int = 0,
    wide_from: int = 0,
    max_prompt: int = 0,
    full_batch: bool = False,
    step8: bool = False,
    width: int = 0,
    lanes: int = 0,
    lanes_upto: int = 0,
    more_lanes: tuple[tuple[int, int], ...] = (),
    lane_option: tuple[tuple[int, int], ...] | None = None,
    grid: int = 0,
    ragged: bool = False,
    seed_buckets: bool = False,
    seed_lanes: bool = False,
    seed_wide: bool = False,
    pow2_batches: bool = False,
) -> Catalog:
    """The recipe's catalog for these capacities; ``wide_mixed`` > 0 also prepares every
    wider mixed width at that prompt bucket (``--mixed-wide-prompt-buckets``), and
    ``wide_from`` > 0 at every prompt bucket of at least that many tokens;
    ``max_prompt`` > 0 loads only prompt capacities up to it (the seed's load-time
    selection, which may reduce capacities where the smaller programs exist);
    ``full_batch`` loads only generation and mixed programs of batch capacity ``slots``
    (load-time selection again: every frame can hold every decoder); ``step8`` adds, as
    a what-if, decode and speculative programs at batch buckets 1, 2, 4 and every
    multiple of 8 (``step8_generation_shapes``); ``width`` > 0 loads the fixed-mode
    programs of that verification width only (generation and mixed; load-time selection
    of a fixed width, so Helios can be compared with itself at each width); ``lanes`` > 1
    declares that many prompt lanes at every prompt bucket (up to ``lanes_upto`` tokens
    when it is > 0; a what-if build; ``more_lanes``' (N, M) pairs then declare N lanes up
    to M tokens over it, in order; ``lane_option`` is the load option prompt_lanes),
    1 loads only
    the one-lane prefill and mixed programs (the seed's L = 1), 0 the recipe's own;
    ``grid`` > 0 adds prompt buckets at every multiple of it from 1024 tokens up;
    ``seed_buckets`` drops the recipe's more_prompt_buckets (the seed's prompt buckets at
    every slot count: the catalog before them); ``seed_lanes`` drops the recipe's
    concurrency-step prompt_lanes (capacity.prompt_lanes alone at every slot count: the
    catalog before them); ``seed_wide`` drops the steps' mixed_wide_prompt_buckets (wider
    mixed widths at the balanced bucket and capacity.mixed_wide_prompt_buckets only);
    ``pow2_batches`` drops the steps' batch_bucket_step (power-of-two decode and
    speculative batch buckets at every slot count: the catalog before them)."""
    chosen = get_recipe(recipe)
    if seed_buckets:
        cap = replace(chosen.capacity, concurrency_prompt_buckets=())
        chosen = replace(chosen, capacity=cap)
    if seed_wide:
        cap = replace(chosen.capacity, concurrency_mixed_wide=())
        chosen = replace(chosen, capacity=cap)
    if pow2_batches:
        cap = replace(chosen.capacity, concurrency_batch_step=())
        chosen = replace(chosen, capacity=cap)
    if seed_lanes or lanes > 1:  # a what-if lane table is the whole table
        cap = replace(chosen.capacity, concurrency_prompt_lanes=())
        chosen = replace(chosen, capacity=cap)
    if grid:
        buckets = chosen.capacity.prompt_buckets
        finer = tuple(sorted({*buckets, *range(1024, max(buckets) + 1, grid)}))
        chosen = replace(chosen, capacity=replace(chosen.capacity, prompt_buckets=finer))
    if lanes > 1:
        buckets = chosen.capacity.prompt_buckets
        table: dict[int, int] = {}
        for n, upto in ((lanes, lanes_upto), *more_lanes):
            table.update({b: n for b in buckets if not upto or b <= upto})
        declared = tuple(sorted(table.items()))
        chosen = replace(chosen, capacity=replace(chosen.capacity, prompt_lanes=declared))
    wide = {wide_mixed} if wide_mixed else set()
    if wide_from:
        buckets = chosen.capacity.prompt_buckets_for(slots)
        wide |= {b for b in buckets if wide_from <= b <= chosen.capacity.max_prefill_chunk}
    if wide:  # besides the recipe's own (the load option replaces them)
        wide |= set(chosen.capacity.mixed_wide_prompt_buckets_for(slots))
    options = LoadOptions(
        mixed_prefill=True,
        concurrency=slots,
        speculative_token_capacity=envelope,
        mixed_wide_prompt_buckets=tuple(sorted(wide)) if wide else None,
        prompt_lanes=lane_option,
    )
    catalog = plan_catalog(chosen, options)
    if step8:
        names = {d.name for d in catalog.descriptors}
        extra = [
            d for d in step8_generation_shapes(resolve(chosen, options)) if d.name not in names
        ]
        catalog = Catalog(catalog.recipe, catalog.options, (*catalog.descriptors, *extra))
    if ragged:
        extra = ragged_host_shapes(catalog)
        catalog = Catalog(catalog.recipe, catalog.options, (*catalog.descriptors, *extra))
    if max_prompt:
        kept = tuple(
            d
            for d in catalog.descriptors
            if not (d.kind is GraphKind.PREFILL and d.token_capacity > max_prompt)
            and not (d.kind is GraphKind.MIXED and d.prefill_capacity > max_prompt)
        )
        catalog = Catalog(catalog.recipe, catalog.options, kept)
    if full_batch:
        kept = tuple(
            d
            for d in catalog.descriptors
            if d.kind is GraphKind.PREFILL or d.batch_capacity >= slots
        )
        catalog = Catalog(catalog.recipe, catalog.options, kept)
    if lanes == 1:
        kept = tuple(d for d in catalog.descriptors if d.prompt_lanes == 1)
        catalog = Catalog(catalog.recipe, catalog.options, kept)
    if width:
        return fixed_width(select_for_mode(catalog, "fixed"), width)
    return select_for_mode(catalog, speculation)


def ragged_host_shapes(catalog: Catalog) -> list:
    """What-if (issue 40, item 3): per-request widths below full batch. For every
    rectangular host-allocated speculative program of batch B >= 8 and width W >= 2, the
    same B and W with half the lanes' extra rows, P = B + B * (W - 1) / 2 (host
    allocation gives them to the lanes whose drafts are worth most)."""
    names = {d.name for d in catalog.descriptors}
    out = []
    for d in catalog.descriptors:
        rectangular = d.packed_capacity == d.batch_capacity * d.token_capacity
        if (
            d.kind is GraphKind.SPECULATIVE
            and not d.is_device_allocated
            and rectangular
            and d.batch_capacity >= 8
            and d.token_capacity >= 2
        ):
            p = d.batch_capacity + d.batch_capacity * (d.token_capacity - 1) // 2
            shape = replace(d, packed_capacity=p, max_packed_extent=-1)
            if shape.name not in names:
                out.append(shape)
    return out


def fixed_width(catalog: Catalog, width: int) -> Catalog:
    """Prefill and state programs, and the generation and mixed programs of exactly this
    verification width (one line naming the width when the build has none)."""
    generation = (GraphKind.DECODE, GraphKind.SPECULATIVE, GraphKind.MIXED)
    kept = tuple(
        d for d in catalog.descriptors if d.kind not in generation or d.token_capacity == width
    )
    if not any(d.kind in generation for d in kept):
        raise ValueError(f"fixed width {width}: the catalog has no generation program that wide")
    return Catalog(catalog.recipe, catalog.options, kept)


def step8_generation_shapes(cap: object) -> list:
    """The recipe's decode and speculative enumeration on vLLM's grid (batch bucket step
    8) for builds whose recipe keeps powers of two. Mixed programs are left out: the
    catalog contract requires a power-of-two mixed batch capacity."""
    from ignition.components import capacity

    stepped = replace(cap, batch_bucket_step=8)
    return capacity.decode_shapes(stepped) + capacity.speculative_shapes(stepped)
