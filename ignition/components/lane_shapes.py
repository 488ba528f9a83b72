"""Prompt-lane twins: the mixed programs that carry several prompts, one per one-lane
mixed program at a bucket where the build declares more than one lane."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind


def even_lanes(bucket: int, most: int) -> int:
    """The most lanes up to ``most`` that split ``bucket`` evenly."""
    return max(n for n in range(1, max(most, 1) + 1) if bucket % n == 0)


def lane_twins(shapes: Iterable[Descriptor], declared: Callable[[int], int]) -> list[Descriptor]:
    """The lane twins of ``shapes``' one-lane mixed programs, ordinary ones first, each
    with the most lanes up to min(``declared(P)``, B - 1) that split P evenly."""
    mixed = [d for d in shapes if d.kind is GraphKind.MIXED and d.prompt_lanes == 1]
    ordered = [d for d in mixed if not d.speculation_enabled]
    ordered += [d for d in mixed if d.speculation_enabled]
    twins = []
    for d in ordered:
        most = min(declared(d.prefill_capacity), d.batch_capacity - 1)
        lanes = even_lanes(d.prefill_capacity, most)
        if lanes > 1:
            twins.append(replace(d, prompt_lanes=lanes))
    return twins
