"""The real runtime: Helios + worker + prepared programs over a tiny random model.

Greedy generation must give the same tokens whatever programs serve it: speculation off,
fixed or adaptive, with or without mixed programs. That exercises input packing (packed
prompt offsets, query lengths, row roles), device-resident pending tokens, speculative
commit and the completion records Helios validates.
"""

from __future__ import annotations

import pytest
import torch

from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from tests.runtime.tiny import EOS, CharDecoder

pytestmark = pytest.mark.usefixtures("reference_kernels")


PROMPTS = {
    "short": [5, 9, 11, 17],
    "long": [(7 * i + 3) % 120 + 4 for i in range(300)],  # two prefill chunks
    "mid": [(5 * i + 1) % 100 + 4 for i in range(70)],
}


def generate(model, catalog, speculation: str, mixed: bool, max_tokens: int = 12):
    options = RuntimeOptions(
        num_slots=4, page_size=64, max_context_tokens=1024, speculation=speculation, mixed=mixed
    )
    engine = assemble_engine(model, catalog, CharDecoder(), [EOS], options)
    outputs = {name: [] for name in PROMPTS}
    finish = {}
    for name, prompt in PROMPTS.items():

        def sink(chunk, name=name):
            outputs[name].extend(chunk.token_ids)
            if chunk.finish_reason:
                finish[name] = chunk.finish_reason

        sampling = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
        engine.submit(GenerationRequest(name, tuple(prompt), sampling), sink)
    engine.run_until_idle(max_steps=2000)
    return outputs, finish, engine


@pytest.fixture(scope="module")
def reference(model, catalog):
    outputs, finish, _ = generate(model, catalog, "off", mixed=False)
    assert all(len(v) == 12 for v in outputs.values())
    assert set(finish.values()) == {"length"}
    return outputs


@pytest.mark.slow
@pytest.mark.parametrize(
    ("speculation", "mixed"),
    [("off", True), ("fixed", False), ("fixed", True), ("adaptive", False), ("adaptive", True)],
)
def test_greedy_tokens_do_not_depend_on_the_programs(model, catalog, reference, speculation, mixed):
    outputs, finish, engine = generate(model, catalog, speculation, mixed)
    assert outputs == reference
    assert set(finish.values()) == {"length"}
    assert engine.live == {}
    ran = engine.stats.snapshot()
    assert ("mixed" in ran.executions_by_kind) == mixed
    if speculation != "off":
        assert ran.speculative_rounds > 0  # programs with proposals really served tokens


def test_eos_finishes_with_stop_and_frees_pages(model, catalog):
    options = RuntimeOptions(
        num_slots=2, page_size=64, max_context_tokens=512, speculation="adaptive"
    )
    engine = assemble_engine(model, catalog, CharDecoder(), [EOS], options)
    first, _, _ = generate(model, catalog, "off", mixed=False, max_tokens=6)
    eos_free = first["short"]
    # Pretend the third greedy token is end-of-sequence: the request must stop right there.
    engine.worker.eos_token_ids = frozenset({eos_free[2]})
    chunks = []
    engine.submit(
        GenerationRequest(
            "a", tuple(PROMPTS["short"]), SamplingParams(max_tokens=6, temperature=0.0)
        ),
        chunks.append,
    )
    engine.run_until_idle(max_steps=500)
    tokens = [t for c in chunks for t in c.token_ids]
    assert tokens == eos_free[:3]
    assert chunks[-1].finish_reason == "stop"
    assert engine.worker.resources.pages_of(0) == []


def test_the_runtime_keeps_snapshot_restore_ready_and_a_scratch_page_free(model, catalog):
    options = RuntimeOptions(num_slots=2, page_size=64, max_context_tokens=512)
    engine = assemble_engine(model, catalog, CharDecoder(), [EOS], options)
    worker = engine.worker
    state = worker.state
    scratch = state.k_cache.shape[1] - 1
    assert worker.resources.num_free_pages == scratch  # the scratch page is never handed out
    worker.resources.begin(0)
    worker.resources.reserve(0, 100, lookahead=1)
    state.seq_lens[0] = 100
    state.gdn_state[:, 0].fill_(0.5)
    worker.state_ops.snapshot(slot=0, row=1)
    worker.resources.begin(1)
    worker.resources.reserve(1, 100, lookahead=1)
    worker.state_ops.restore(slot=1, row=1)
    assert int(state.seq_lens[1]) == 100
    assert torch.equal(state.gdn_state[:, 1], state.gdn_state[:, 0])
