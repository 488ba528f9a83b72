"""Initialization as a scheduled prerequisite through the real runtime (CPU, tiny model):
a fresh request's zero state is the prepared init program (compiler/state_ops.py), a
frame Helios schedules before the request's first prompt chunk, not an eager reset at
assignment; a slot reused after another request still starts from the zero state."""

from __future__ import annotations

import pytest
import torch

from ignition.components.capacity import plan_catalog
from ignition.kernels.dispatch import use_backend
from ignition.model.config import Qwen38Config
from ignition.model.weights import random_model
from ignition.recipes import LoadOptions, get_recipe
from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.requests import GenerationRequest, SamplingParams
from tests.runtime.test_model_runtime import EOS, CharDecoder

FIRST = tuple((13 * j) % 90 + 4 for j in range(30))
SECOND = tuple((7 * j) % 90 + 4 for j in range(25))


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return random_model(Qwen38Config.tiny(), seed=3)


@pytest.fixture(scope="module")
def catalog():
    return plan_catalog(get_recipe("qwen38"), LoadOptions(mixed_prefill=True, max_prefill_chunk=64))


@pytest.fixture(autouse=True)
def reference_kernels():
    with use_backend("reference"):
        yield


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
