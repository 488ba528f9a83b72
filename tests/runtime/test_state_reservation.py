"""State-row reservation covers the maximum verification width across separate and
mixed catalogs (design: "Mixed execution contract"): every slot's pages reach the
context limit plus the widest round's write extent, whichever catalog holds it."""

from __future__ import annotations

import torch

from ignition.components.catalog import Catalog
from ignition.model.config import ModelConfig
from ignition.runtime.assembly import RuntimeOptions, state_for
from tests.helios.helios_helpers import decode, mixed, prefill, spec

PAGE = 8
CONTEXT = 128


class _Model:
    """What state_for reads of a model: its config and its parameters' dtype."""

    config = ModelConfig.tiny()

    def parameters(self):
        yield torch.zeros(1)


def _pages_per_slot(*descriptors) -> int:
    options = RuntimeOptions(num_slots=2, page_size=PAGE, max_context_tokens=CONTEXT)
    catalog = Catalog("synthetic", {}, (prefill(64), decode(1), *descriptors))
    state, _, _ = state_for(_Model(), catalog, options, torch.device("cpu"))
    return state.page_table.shape[1]


def test_the_widest_width_of_the_mixed_catalog_sets_the_reservation():
    # separate rounds write at most 2 + 1 + 1 positions; the mixed width-8 row 8 + 7 + 1
    assert _pages_per_slot(spec(1, 2), mixed(2, 64, 8)) == -(-(CONTEXT + 16) // PAGE)


def test_the_widest_width_of_the_separate_catalog_sets_the_reservation():
    assert _pages_per_slot(spec(1, 8), mixed(2, 64, 2)) == -(-(CONTEXT + 16) // PAGE)
