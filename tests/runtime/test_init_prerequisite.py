"""Initialization as a scheduled prerequisite through the real runtime (CPU, tiny model):
a fresh request's zero state is the prepared init program (compiler/state_ops.py), a
frame Helios schedules before the request's first prompt chunk, not an eager reset at
assignment; a slot reused after another request still starts from the zero state."""

from __future__ import annotations

import pytest

from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from tests.runtime.tiny import EOS, CharDecoder, tiny_catalog

FIRST = tuple((13 * j) % 90 + 4 for j in range(30))
SECOND = tuple((7 * j) % 90 + 4 for j in range(25))


@pytest.fixture(scope="module")
def catalog():
    return tiny_catalog(max_prefill_chunk=64)


pytestmark = pytest.mark.usefixtures("reference_kernels")


def _engine(model, catalog):
    options = RuntimeOptions(
        num_slots=2, page_size=16, max_context_tokens=256, speculation="off", snapshot_rows=0
    )
    return assemble_engine(model, catalog, CharDecoder(), [EOS], options)


def _generate(engine, name: str, prompt: tuple[int, ...]) -> tuple[int, ...]:
    out: list[int] = []
    sampling = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)
    engine.submit(GenerationRequest(name, prompt, sampling), lambda c: out.extend(c.token_ids))
    engine.run_until_idle(max_steps=2000)
    return tuple(out)


def test_a_fresh_request_starts_through_the_init_program_not_an_eager_reset(model, catalog):
    alone = _generate(_engine(model, catalog), "alone", SECOND)
    engine = _engine(model, catalog)

    def eager(slot: int) -> None:
        raise AssertionError(f"slot {slot} was reset outside the init program")

    engine.worker.state.reset_slot = eager
    _generate(engine, "first", FIRST)
    # the second request reuses the first one's slot: the init zeroes what it left
    assert _generate(engine, "second", SECOND) == alone
    assert engine.stats.snapshot().executions_by_kind.get("init") == 2
