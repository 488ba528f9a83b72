"""Physical program enumeration: recipe + load options -> descriptors.

Everything here is a pure function of a recipe's declared capacities and the
user's load-time options. The compiler prepares exactly these shapes, Helios
selects among exactly these, and CI checks their counts against what each
recipe declares, so the rules below are the single source of truth for what a
catalog contains (see "Speculative graph coverage" and "Mixed execution
contract" in the scheduling design).

A descriptor *is* the physical shape at this stage; the compiler later fills in
nothing but validation results, so no separate shape type is needed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ignition.components.batch_buckets import (
    generation_buckets,
    next_power_of_two,
    request_buckets,
)
from ignition.components.catalog import Catalog
from ignition.components.descriptor import Descriptor
from ignition.components.lane_shapes import even_lanes, lane_twins
from ignition.components.program_kinds import MAX_MIXED_BATCH, GraphKind, ValueSource
from ignition.recipes import SPECULATION_MODES, LoadOptions, Recipe
from ignition.recipes.options import BUCKET_STEP_RULE, is_bucket_step


class CapacityError(ValueError):
    """Load-time options that ask for programs the recipe does not prepare."""


@dataclass(frozen=True)
class ResolvedCapacity:
    """The effective capacities after applying load options to a recipe."""

    recipe: str
    concurrency: int
    padded_concurrency: int
    prompt_buckets: tuple[int, ...]
    max_prefill_chunk: int
    num_draft_tokens: int
    completion_token_capacity: int
    speculative_token_capacity: int
    speculation: str
    mixed_prefill: bool
    kv_page_size: int
    mixed_wide_prompt_buckets: tuple[int, ...] = ()
    # (prompt bucket, L > 1): the buckets whose prefill and mixed programs also carry L
    # prompt lanes (capacity.prompt_lanes, at most the build's concurrency)
    prompt_lanes: tuple[tuple[int, int], ...] = ()
    # the decode and speculative programs' batch grid (batch_buckets.generation_buckets)
    batch_bucket_step: int = 0

    @property
    def generation_batch_buckets(self) -> list[int]:
        return generation_buckets(self.padded_concurrency, self.batch_bucket_step)

    def lane_counts(self, bucket: int) -> tuple[int, ...]:
        """The prompt-lane counts prepared at ``bucket``: one, and the recipe's L if more."""
        lanes = dict(self.prompt_lanes).get(bucket, 1)
        return (1,) if lanes <= 1 else (1, lanes)


    @property
    def speculation_active(self) -> bool:
        """Zero drafts selects the ordinary catalog whatever the mode says."""
        return self.speculation != "off" and self.num_draft_tokens > 0


def resolve(recipe: Recipe, options: LoadOptions | None = None) -> ResolvedCapacity:
    """Apply load options; they may only shrink capacities to programs that exist."""
    options = options or LoadOptions()
    cap = recipe.capacity
    where = f"recipe {recipe.name} ({recipe.path})"

    def bounded(
        flag: str, value: int | None, declared: int, minimum: int, maximum: int | None = None
    ) -> int:
        """The declared default when unset; otherwise at most ``maximum`` (the recipe's
        ``capacity.maxima`` entry, or the default when the recipe declares none)."""
        maximum = declared if maximum is None else maximum
        if value is None:
            return declared
        if value < minimum:
            raise CapacityError(f"{where}: option {flag} = {value}: must be at least {minimum}")
        if value > maximum:
            raise CapacityError(
                f"{where}: option {flag} = {value}: exceeds what the recipe prepares ({maximum})"
            )
        return value

    concurrency = bounded(
        "--concurrency", options.concurrency, cap.concurrency, 1, cap.max_concurrency
    )
    envelope = bounded(
        "--speculative-token-capacity",
        options.speculative_token_capacity,
        cap.default_envelope(concurrency),
        1,
        cap.max_speculative_token_capacity,
    )
    drafts = bounded("--num-draft-tokens", options.num_draft_tokens, cap.num_draft_tokens, 0)

    # the declared buckets and, for builds of enough slots, the steps' more_prompt_buckets
    buckets = cap.prompt_buckets_for(concurrency)
    chunk = cap.max_prefill_chunk
    if options.max_prefill_chunk is not None:
        chunk = options.max_prefill_chunk
        if chunk not in buckets:
            raise CapacityError(
                f"{where}: option --max-prefill-chunk = {chunk}: not a prepared prompt bucket "
                f"(choose one of {list(buckets)})"
            )

    speculation = options.speculation or cap.speculation
    if speculation not in SPECULATION_MODES:
        raise CapacityError(f"{where}: option --speculation = {speculation!r}: unknown mode")
    if SPECULATION_MODES.index(speculation) > SPECULATION_MODES.index(cap.speculation):
        raise CapacityError(
            f"{where}: option --speculation = {speculation}: the recipe prepares at most "
            f"{cap.speculation!r}"
        )

    if options.mixed_prefill and not recipe.supports.mixed_capture:
        raise CapacityError(
            f"{where}: option --mixed-prefill: the recipe does not declare mixed capture "
            "(supports.mixed_capture is false)"
        )

    wide = cap.mixed_wide_prompt_buckets_for(concurrency)
    if options.mixed_wide_prompt_buckets is not None:
        wide = tuple(options.mixed_wide_prompt_buckets)
        for bucket in wide:
            if bucket not in buckets or bucket > chunk:
                raise CapacityError(
                    f"{where}: option --mixed-wide-prompt-buckets = {bucket}: not a prepared "
                    f"prompt bucket (choose among {[b for b in buckets if b <= chunk]})"
                )
        if wide and not (recipe.supports.mixed_capture and recipe.supports.speculation):
            raise CapacityError(
                f"{where}: option --mixed-wide-prompt-buckets: the recipe captures no "
                "speculative mixed programs"
            )

    # the declared lanes and, for builds of enough slots, the steps' prompt_lanes over them
    lanes = cap.prompt_lanes_for(concurrency)
    if options.prompt_lanes is not None:
        lanes = options.prompt_lanes
    for bucket, count in lanes:
        if bucket not in buckets or count < 1 or bucket % count:
            raise CapacityError(
                f"{where}: option prompt_lanes = {{{bucket}: {count}}}: needs a prepared prompt "
                f"bucket (one of {list(buckets)}) that L >= 1 lanes split evenly"
            )

    step = cap.batch_bucket_step_for(concurrency)
    if options.batch_bucket_step is not None:
        step = options.batch_bucket_step
        if not is_bucket_step(step):
            raise CapacityError(f"{where}: option batch_bucket_step = {step}: {BUCKET_STEP_RULE}")

    return ResolvedCapacity(
        recipe=recipe.name,
        concurrency=concurrency,
        padded_concurrency=next_power_of_two(concurrency),
        prompt_buckets=tuple(b for b in buckets if b <= chunk),
        max_prefill_chunk=chunk,
        num_draft_tokens=drafts,
        completion_token_capacity=cap.completion_token_capacity,
        speculative_token_capacity=envelope,
        speculation=speculation,
        mixed_prefill=options.mixed_prefill,
        kv_page_size=cap.kv_page_size,
        mixed_wide_prompt_buckets=tuple(b for b in wide if b <= chunk),
        prompt_lanes=tuple(
            (b, even_lanes(b, min(count, concurrency)))
            for b, count in lanes
            if b <= chunk and even_lanes(b, min(count, concurrency)) > 1
        ),
        batch_bucket_step=step,
    )


def prefill_shapes(cap: ResolvedCapacity) -> list[Descriptor]:
    """One prefill program per (prompt bucket, lane count): a single-prompt program at every
    bucket and an L-lane one where the recipe declares L > 1 (capacity.prompt_lanes)."""
    return [
        Descriptor(
            GraphKind.PREFILL,
            batch_capacity=1,
            proposal_depth=0,
            token_capacity=c,
            packed_capacity=c,
            prompt_lanes=lanes,
        )
        for c in cap.prompt_buckets
        for lanes in cap.lane_counts(c)
    ]


def decode_shapes(cap: ResolvedCapacity) -> list[Descriptor]:
    """Ordinary width-one decode at every generation batch bucket."""
    return [
        Descriptor(
            GraphKind.DECODE,
            batch_capacity=b,
            proposal_depth=0,
            token_capacity=1,
            packed_capacity=b,
        )
        for b in cap.generation_batch_buckets
    ]


def max_verification_width(cap: ResolvedCapacity) -> int:
    """Widest target row a lane can use: pending token plus every draft, within limits."""
    return min(cap.num_draft_tokens + 1, cap.completion_token_capacity)


def _speculative(
    b: int, w: int, p: int, source: ValueSource, kind: GraphKind, prefill: int = 0
) -> Descriptor:
    # The producer depth is the widest prefix a lane can verify: proposals past W - 1
    # could never be verified, and a deeper producer is a distinct, costlier program.
    depth = w - 1
    return Descriptor(
        kind,
        batch_capacity=b,
        proposal_depth=depth,
        token_capacity=w,
        packed_capacity=p,
        prefill_capacity=prefill,
        confidence_width=depth,
        speculation_enabled=True,
        value_source=source,
    )


def speculative_shapes(cap: ResolvedCapacity) -> list[Descriptor]:
    """Complete speculative programs (proposal + allocation + verify + commit).

    - width one (D = 0) at every request bucket: cost competes with wider rounds and
      the draft context stays warm;
    - rectangular host-allocated programs (``query_length``), P = B x W <= R;
    - adaptive mode adds ragged device-allocated programs (``speculative_prefix_limit``)
      whose lane ceilings may sum above P: one per request bucket, using the whole
      envelope P = R with the widest lane that still leaves every other lane its
      pending token.
    """
    if not cap.speculation_active:
        return []
    buckets = cap.generation_batch_buckets
    envelope = cap.speculative_token_capacity
    widest = max_verification_width(cap)
    shapes = [
        _speculative(b, 1, b, ValueSource.QUERY_LENGTH, GraphKind.SPECULATIVE) for b in buckets
    ]
    for b in buckets:
        for w in range(2, widest + 1):
            if b * w <= envelope:
                shapes.append(
                    _speculative(b, w, b * w, ValueSource.QUERY_LENGTH, GraphKind.SPECULATIVE)
                )
    if cap.speculation == "adaptive":
        for b in buckets:
            w = min(widest, envelope - b + 1)
            if b >= 2 and w >= 2 and b * w > envelope:
                shapes.append(
                    _speculative(
                        b, w, envelope, ValueSource.SPECULATIVE_PREFIX_LIMIT, GraphKind.SPECULATIVE
                    )
                )
    return shapes


def balanced_prompt_bucket(buckets: tuple[int, ...] | list[int]) -> int:
    """The bucket minimising max(P / P_min, P_max / P); ties go to the smaller bucket.

    It balances the worst multiplicative distance to short and long prompt chunks,
    so one wider-width mixed graph serves both reasonably.
    """
    lo, hi = min(buckets), max(buckets)
    return min(sorted(buckets), key=lambda p: max(p / lo, hi / p))


def mixed_batch_buckets(cap: ResolvedCapacity) -> list[int]:
    """Powers of two from 2 through padded concurrency (capped at 64): a prompt row plus
    at least one decoder."""
    return request_buckets(min(cap.padded_concurrency, MAX_MIXED_BATCH), minimum=2)


def mixed_widths(cap: ResolvedCapacity, batch: int) -> list[int]:
    """Wider verification widths inside the target-token envelope for one batch bucket."""
    return [
        w
        for w in range(2, max_verification_width(cap) + 1)
        if batch * w <= cap.speculative_token_capacity
    ]


def wide_prompt_buckets(cap: ResolvedCapacity, width: int) -> list[int]:
    """The prompt buckets of width ``width`` > 1: the seed's single balanced bucket, and
    the buckets the recipe (or ``--mixed-wide-prompt-buckets``) declares besides it."""
    fitting = [c for c in cap.prompt_buckets if c >= width]
    declared = {c for c in cap.mixed_wide_prompt_buckets if c >= width}
    return sorted({balanced_prompt_bucket(fitting), *declared})


def mixed_shapes(cap: ResolvedCapacity) -> list[Descriptor]:
    """The joint prompt/decode catalog bounded before tuning and capture.

    Per batch bucket: every prompt bucket at width one, and for each wider width
    within the envelope the single balanced prompt bucket (plus any the recipe declares
    in ``capacity.mixed_wide_prompt_buckets``); a speculative catalog
    (width one keeps draft state) when speculation is active, and always an
    ordinary one (width one, no draft-state updates); and the prompt-lane twins of
    them all where the build declares lanes (``lane_shapes.lane_twins``).
    """
    if not cap.mixed_prefill:
        return []
    shapes: list[Descriptor] = []
    for b in mixed_batch_buckets(cap):
        first = len(shapes)
        if cap.speculation_active:
            for c in cap.prompt_buckets:
                shapes.append(_speculative(b, 1, b, ValueSource.QUERY_LENGTH, GraphKind.MIXED, c))
            for w in mixed_widths(cap, b):
                for c in wide_prompt_buckets(cap, w):
                    shapes.append(
                        _speculative(b, w, b * w, ValueSource.QUERY_LENGTH, GraphKind.MIXED, c)
                    )
        for c in cap.prompt_buckets:
            shapes.append(
                Descriptor(
                    GraphKind.MIXED,
                    batch_capacity=b,
                    proposal_depth=0,
                    token_capacity=1,
                    packed_capacity=b,
                    prefill_capacity=c,
                )
            )
        shapes += lane_twins(shapes[first:], lambda c: cap.lane_counts(c)[-1])
    return shapes


def vision_shapes(recipe: Recipe) -> list[Descriptor]:
    """One vision program per declared patch capacity (load options leave them alone)."""
    cap = recipe.capacity
    return [
        Descriptor(GraphKind.VISION, cap.vision_max_images, 0, patches, patches)
        for patches in cap.vision_patch_capacities
    ]


def plan_catalog(recipe: Recipe, options: LoadOptions | None = None) -> Catalog:
    """Every physical program a build with these options prepares, in capture order."""
    options = options or LoadOptions()
    cap = resolve(recipe, options)
    descriptors = (
        prefill_shapes(cap)
        + decode_shapes(cap)
        + speculative_shapes(cap)
        + mixed_shapes(cap)
        + vision_shapes(recipe)
    )
    return Catalog(recipe=recipe.name, options=options.to_json(), descriptors=tuple(descriptors))
