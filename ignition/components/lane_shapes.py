"""Prompt-lane twins: the mixed programs that carry several prompts (issue 39).

Where the build declares L > 1 prompt lanes at a prompt bucket P (``capacity.prompt_lanes``),
every one-lane mixed program at P, ordinary or speculative and of any verification width,
comes with a twin of the same shape carrying the most lanes up to min(L, B - 1) that split
P evenly (each lane a row of P / L tokens in the lane-major prompt workspace,
``model.packing`` and ``model.round_prompt``); one row stays a decoder. A twin of one lane
is no twin. Prefill programs take their L directly (``capacity.prefill_shapes``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from ignition.components.catalog import Descriptor, GraphKind


def even_lanes(bucket: int, most: int) -> int:
    """The most lanes up to ``most`` that split ``bucket`` evenly (each lane a row of
    bucket / L tokens in the prompt workspace, model.packing)."""
    return max(n for n in range(1, max(most, 1) + 1) if bucket % n == 0)


def lane_twins(shapes: Iterable[Descriptor], declared: Callable[[int], int]) -> list[Descriptor]:
    """The lane twins of ``shapes``' one-lane mixed programs, ordinary ones first (in
    order), then speculative ones; ``declared(P)`` is the build's L at bucket P."""
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
