"""Issue 31: through the real engine, a Qwen3.8-Flash-Next model (PLE windows, n-gram
context, indexer rings and block keys, MTP) generates the same greedy tokens with prefix
retention off, with few snapshot rows (restores and evictions) and through a page pool small
enough to force preemption, with speculation off and adaptive."""

from __future__ import annotations

import pytest

from ignition.components.capacity import plan_catalog
from ignition.components.catalog import Catalog
from ignition.components.program_kinds import GraphKind
from ignition.recipes import LoadOptions, get_recipe
from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from tests.runtime.test_retention_differential import _run, _sequence
from tests.runtime.tiny import EOS, CharDecoder

pytestmark = pytest.mark.slow

TIGHT_PAGES = 7


@pytest.fixture(scope="module", params=["off", "adaptive"])
def engines(request, qwen4_model):
    full = plan_catalog(
        get_recipe("qwen4-exp"), LoadOptions(mixed_prefill=True, max_prefill_chunk=128)
    )
    text_only = tuple(d for d in full.descriptors if d.kind is not GraphKind.VISION)
    catalog = Catalog(full.recipe, full.options, text_only)

    def build(rows: int, pages: int | None = None):
        options = RuntimeOptions(
            num_slots=4,
            page_size=16,
            max_context_tokens=512,
            speculation=request.param,
            snapshot_rows=rows,
            num_pages=pages,
        )
        return assemble_engine(qwen4_model, catalog, CharDecoder(), [EOS], options)

    return {"off": build(0), "few": build(2), "tight": build(4, TIGHT_PAGES)}


def test_retention_and_preemption_change_no_greedy_output(engines):
    for seed in (0,):
        waves = _sequence(seed)
        expected = _run(engines["off"], waves)
        assert _run(engines["few"], waves) == expected, seed
        assert _run(engines["tight"], waves) == expected, seed
    assert engines["few"].stats.snapshot().prefix_cache_hits > 0
    assert engines["tight"].stats.snapshot().preemptions > 0
