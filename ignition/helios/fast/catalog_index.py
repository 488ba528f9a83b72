"""The catalog index of the bounded search: ``decide.policy.CatalogIndex`` with the
shapes each shape is padded beyond (``dominators``), which the bounds read to skip a
dominated shape's evaluation when a dominating one of the same work is evaluated."""

from __future__ import annotations

from collections.abc import Sequence

from ignition.components.descriptor import Descriptor
from ignition.helios.decide import policy


class CatalogIndex(policy.CatalogIndex):
    """Lines of one catalog (``decide.policy.CatalogIndex``), plus, per shape, the shapes
    of its family padded beyond it: the only pairs pruning can act on (same logical work
    implies the same family)."""

    def __init__(self, descriptors: Sequence[Descriptor]) -> None:
        super().__init__(descriptors)
        self.dominators: dict[int, tuple[Descriptor, ...]] = {}
        for d in self.descriptors:
            found = tuple(
                o
                for o in self.descriptors
                if policy.shape_family(o) == policy.shape_family(d)
                and policy.dominates(policy.capacities(o), policy.capacities(d))
            )
            if found:
                self.dominators[id(d)] = found
