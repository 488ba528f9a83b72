"""A mixed program carrying no prompt yields to its generation twin (issue 39/40)."""

from __future__ import annotations

from collections.abc import Sequence

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind

GENERATION_KINDS = (GraphKind.DECODE, GraphKind.SPECULATIVE)


def generation_shape(d: Descriptor) -> tuple:
    """What a decode-only cohort of ``d`` runs on: everything but the prompt bucket."""
    return (
        d.batch_capacity,
        d.token_capacity,
        d.packed_capacity,
        d.proposal_depth,
        d.speculation_enabled,
        d.value_source,
        d.confidence_width,
    )


def twinned_mixed(descriptors: Sequence[Descriptor]) -> frozenset[int]:
    """The ids of the mixed programs of ``descriptors`` that have a generation twin."""
    generation = {generation_shape(d) for d in descriptors if d.kind in GENERATION_KINDS}
    return frozenset(
        id(d) for d in descriptors if d.is_mixed and generation_shape(d) in generation
    )
