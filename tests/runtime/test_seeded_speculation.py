"""Issue 24, defect 2: a seeded request gives the same tokens whatever speculation does.

Five identical seeded requests used to give five outputs with speculation on (the widths
Helios chose changed which noise drew each token) and one with it off. Under coupled
verification every emitted token is the one ordinary sampling emits at its position.
"""

from __future__ import annotations

import pytest

from ignition.model.coupled_verify import use_verification
from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from tests.runtime.test_non_finite_rows import CharDecoder
from tests.runtime.tiny import tiny_catalog

pytestmark = pytest.mark.usefixtures("reference_kernels")
SEEDED = dict(max_tokens=16, temperature=1.0, top_p=0.9, top_k=20, seed=7, ignore_eos=True)
PROMPT = (5, 9, 11, 17, 9)


@pytest.fixture(scope="module")
def catalog():
    return tiny_catalog(max_prefill_chunk=64)


def generate(model, catalog, speculation: str, neighbours: int = 0) -> list[int]:
    """The seeded request's tokens, beside ``neighbours`` other requests (other widths)."""
    options = RuntimeOptions(
        num_slots=4, page_size=64, max_context_tokens=512, speculation=speculation
    )
    engine = assemble_engine(model, catalog, CharDecoder(), [2], options)
    chunks = []
    engine.submit(GenerationRequest("seeded", PROMPT, SamplingParams(**SEEDED)), chunks.append)
    for i in range(neighbours):
        other = SamplingParams(max_tokens=8 + 5 * i, temperature=0.8, ignore_eos=True)
        engine.submit(GenerationRequest(f"n{i}", (3 + i, 4, 5), other), lambda _: None)
    engine.run_until_idle(max_steps=3000)
    return [t for c in chunks for t in c.token_ids]


def test_a_seeded_request_gives_the_same_tokens_with_speculation_off_fixed_and_adaptive(
    model, catalog
):
    off = generate(model, catalog, "off")
    assert len(off) == SEEDED["max_tokens"]
    for speculation in ("fixed", "adaptive"):
        for neighbours in (0, 3):
            assert generate(model, catalog, speculation, neighbours) == off, (
                speculation,
                neighbours,
            )


def test_rejection_verification_does_not_promise_it(model, catalog):
    """The differential: the property comes from coupling, not from an idle speculator."""
    off = generate(model, catalog, "off")
    with use_verification("rejection"):
        assert generate(model, catalog, "fixed") != off
