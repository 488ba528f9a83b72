"""A mixed program carrying no prompt yields to its generation twin (issue 39/40).

The seed lets the smallest prompt capacity of each mixed line offer a decode-only
cohort (``scheduling-runtime-design.md``, "Mixed execution contract"). Run that way, a
mixed program is a generation program with an idle prompt bucket: the same batch,
verification width, depth and packed capacity, plus prompt capacity that is padding,
and a frame that drains the transport window. Pruning would drop it ("timing estimates
cannot make redundant padding preferable"), but it compares only candidates of the
same graph kind, so a duration estimate can still prefer it: a graph's cost entry
holds the median of its recent runs whatever their active rows, so a mixed program
last measured at 47 rows looks cheaper than a decode program preseeded at 64
(``docs/scheduling.md``, "A mixed program carrying no prompt").

**Rule** (``PolicyConfig.generation_twin``). A mixed program whose catalog holds a
*generation twin* (a decode or speculative program with the same batch capacity,
verification width, packed capacity, proposal depth, speculation variant, value source
and confidence width) offers no decode-only cohort: its twin carries every such cohort
with less padding. A mixed program without a twin keeps the seed's decode-only cohort.
Static per catalog (``policy.CatalogIndex.twinned``); both selectors read it through
``policy.active_descriptors``.
"""

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
