"""``capacity.prompt_lanes`` and ``capacity.concurrency_defaults``: what a build prepares by
its slot count.

A step applies to builds of at least its ``concurrency`` slots: its R becomes the default, its
more_prompt_buckets are added, its prompt_lanes merged over ``capacity.prompt_lanes`` and its
mixed_wide_prompt_buckets joined to ``capacity.mixed_wide_prompt_buckets``. The recipe's
default build sees none of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ignition.recipes.options import BUCKET_STEP_RULE, is_bucket_step
from ignition.recipes.reader import Reader, bucket_rule, bucket_subset, int_list, positive

Lanes = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class ConcurrencySteps:
    """The parsed steps ((slots, R), (slots, buckets), (slots, lanes)), by increasing slots."""

    envelopes: tuple[tuple[int, int], ...] = ()
    buckets: tuple[tuple[int, tuple[int, ...]], ...] = ()
    lanes: tuple[tuple[int, Lanes], ...] = ()
    wide: tuple[tuple[int, tuple[int, ...]], ...] = ()
    batch_steps: tuple[tuple[int, int], ...] = ()


def parse_prompt_lanes(
    r: Reader, key: str, buckets: set[int], bucket_owner: str, concurrency: int, owner: str
) -> Lanes:
    """A {prompt bucket: L} table under ``key``: each bucket one of ``buckets``, 1 <= L <=
    ``concurrency``, L dividing the bucket."""
    where_key = r.sub(key)
    table = r.get(key, dict)
    pairs = []
    for bucket, lanes in table.items():
        where = f"{where_key}.{bucket}"
        if isinstance(bucket, bool) or not isinstance(bucket, int) or bucket not in buckets:
            r.fail(bucket, f"not one of {bucket_owner} {sorted(buckets)}", where)
        if isinstance(lanes, bool) or not isinstance(lanes, int):
            r.fail(lanes, "expected int", where)
        if not 1 <= lanes <= concurrency:
            r.fail(lanes, f"must lie in 1..{owner} = {concurrency}", where)
        if bucket % lanes:
            r.fail(
                lanes, f"must split the bucket {bucket} evenly (lanes of bucket / L tokens)", where
            )
        pairs.append((bucket, lanes))
    return tuple(sorted(pairs))


def parse_concurrency_steps(
    r: Reader,
    concurrency: int,
    max_concurrency: int,
    envelope: int,
    max_envelope: int,
    declared: tuple[int, ...],
) -> ConcurrencySteps:
    """``capacity.concurrency_defaults``: a list of steps above the declared default,
    increasing, within the maxima."""
    if "concurrency_defaults" not in r.data:
        return ConcurrencySteps()
    envelopes: list[tuple[int, int]] = []
    more: list[tuple[int, tuple[int, ...]]] = []
    lanes: list[tuple[int, Lanes]] = []
    wide: list[tuple[int, tuple[int, ...]]] = []
    batch_steps: list[tuple[int, int]] = []
    known = set(declared)
    previous = (concurrency, envelope)
    for i, raw in enumerate(r.get("concurrency_defaults", list)):
        item = Reader(r.path, raw, f"{r.sub('concurrency_defaults')}[{i}]")
        slots = positive(item, "concurrency")
        value = positive(item, "speculative_token_capacity")
        if slots <= previous[0] or slots > max_concurrency:
            item.fail(
                slots,
                f"must exceed {previous[0]} and be at most capacity.maxima.concurrency "
                f"{max_concurrency}",
                item.sub("concurrency"),
            )
        if value < previous[1] or value > max_envelope:
            item.fail(
                value,
                f"must be at least {previous[1]} and at most "
                f"capacity.maxima.speculative_token_capacity {max_envelope}",
                item.sub("speculative_token_capacity"),
            )
        if "more_prompt_buckets" in item.data:
            extra = _more_prompt_buckets(item, known, declared[-1])
            known.update(extra)
            more.append((slots, extra))
        if "prompt_lanes" in item.data:
            at = f"the prompt buckets of a {slots}-slot build"
            owner = item.sub("concurrency")
            table = parse_prompt_lanes(item, "prompt_lanes", known, at, slots, owner)
            lanes.append((slots, table))
        if "mixed_wide_prompt_buckets" in item.data:
            wide.append((slots, _wide_buckets(item, known)))
        if "batch_bucket_step" in item.data:
            batch_steps.append((slots, _batch_step(item)))
        item.finish()
        envelopes.append((slots, value))
        previous = (slots, value)
    return ConcurrencySteps(
        tuple(envelopes), tuple(more), tuple(lanes), tuple(wide), tuple(batch_steps)
    )


def _batch_step(item: Reader) -> int:
    """One step's batch_bucket_step: 0 (powers of two) or a power of two >= 2."""
    step = item.get("batch_bucket_step", int)
    if not is_bucket_step(step):  # Reader.get has refused bools
        item.fail(step, BUCKET_STEP_RULE, item.sub("batch_bucket_step"))
    return step


def _wide_buckets(item: Reader, known: set[int]) -> tuple[int, ...]:
    """One step's mixed_wide_prompt_buckets: prompt buckets of a build of that many slots
    (declared or an earlier or this step's more_prompt_buckets)."""
    return bucket_subset(
        item, "mixed_wide_prompt_buckets", known, "a prompt bucket of this build"
    )


def _more_prompt_buckets(item: Reader, known: set[int], largest: int) -> tuple[int, ...]:
    """One step's more_prompt_buckets: strictly increasing multiples of the prompt alignment
    below the largest bucket, none already declared."""
    key = item.sub("more_prompt_buckets")
    extra = int_list(item, "more_prompt_buckets", bucket_rule)
    if list(extra) != sorted(set(extra)):
        item.fail(list(extra), "must be strictly increasing", key)
    for i, bucket in enumerate(extra):
        if bucket in known:
            why = "already a prompt bucket (capacity.prompt_buckets or an earlier step)"
            item.fail(bucket, why, f"{key}[{i}]")
        if bucket >= largest:
            item.fail(bucket, f"must lie below the largest prompt bucket {largest}", f"{key}[{i}]")
    return extra
