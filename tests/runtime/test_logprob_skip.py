"""Issue 30: an eager frame in which no request asked for logprobs skips the vocabulary-wide
log-softmax and top-k (``PreparedProgram.run(needs_logprobs=False)``); every token, and
every logprob a request asked for, is the same as when every frame computes them.

The engine runs the tiny model on CPU (eager programs), speculation off (step programs)
and on (round programs). Two engine runs may shape their frames differently (Helios plans
from measured timings, adaptive speculation from acceptance), which moves a logprob's last
bits; the bitwise claim is checked on one step from two equal states instead.
"""

from __future__ import annotations

import pytest
import torch

from ignition.compiler.graph import PreparedProgram, map_tensors
from ignition.model import speculative, step
from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors as DeviceSampling
from ignition.model.state import ModelState, contiguous_pages
from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.executors import program as program_executor
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from tests.runtime.tiny import tiny_catalog

PROMPTS = {"a": [5, 9, 11, 17, 9], "b": [7, 7, 7, 8, 9] * 6, "c": [3, 4, 5]}

pytestmark = pytest.mark.usefixtures("reference_kernels")


class CharDecoder:
    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "".join(chr(0x4E00 + i) for i in ids)


@pytest.fixture(scope="module")
def catalog():
    return tiny_catalog(max_prefill_chunk=64)


def generate(model, catalog, speculation: str, logprobs: dict[str, int]):
    """Every prompt at once through one engine, ``logprobs[name]`` alternatives for the
    named ones; returns (tokens, logprob items) by prompt name."""
    options = RuntimeOptions(
        num_slots=4, page_size=64, max_context_tokens=512, speculation=speculation
    )
    engine = assemble_engine(model, catalog, CharDecoder(), [2], options)
    chunks = {name: [] for name in PROMPTS}
    for name, prompt in PROMPTS.items():
        params = SamplingParams(
            max_tokens=12, temperature=0.0, ignore_eos=True, logprobs=logprobs.get(name)
        )
        engine.submit(GenerationRequest(name, tuple(prompt), params), chunks[name].append)
    engine.run_until_idle(max_steps=3000)
    tokens = {n: [t for c in cs for t in c.token_ids] for n, cs in chunks.items()}
    items = {n: [lp for c in cs for lp in c.logprobs] for n, cs in chunks.items()}
    return tokens, items


class LogprobCalls:
    """Counts the vocabulary-wide logprob calls made by program runs after a program's
    first (which computes them whatever the flag: it allocates the static outputs)."""

    def __init__(self, monkeypatch) -> None:
        self.later_runs = 0
        self.in_later_run = False
        run = PreparedProgram.run

        def counted_run(program, needs_logprobs: bool = True):
            self.in_later_run = program.outputs is not None
            try:
                return run(program, needs_logprobs)
            finally:
                self.in_later_run = False

        def counting(inner):
            def token_logprobs(raw, tokens):
                self.later_runs += self.in_later_run
                return inner(raw, tokens)

            return token_logprobs

        monkeypatch.setattr(PreparedProgram, "run", counted_run)
        monkeypatch.setattr(step, "token_logprobs", counting(step.token_logprobs))
        monkeypatch.setattr(speculative, "token_logprobs", counting(speculative.token_logprobs))


@pytest.mark.parametrize("speculation", ["off", "adaptive"])
def test_frames_without_a_logprob_request_skip_the_vocabulary_wide_logprobs(
    model, catalog, speculation, monkeypatch
):
    calls = LogprobCalls(monkeypatch)
    generate(model, catalog, speculation, {})
    assert calls.later_runs == 0
    generate(model, catalog, speculation, {"b": 2})
    assert calls.later_runs > 0  # the counter sees the calls a request asks for


def _always_logprobs(monkeypatch) -> None:
    """The executor's launch told that every frame needs logprobs (today's graph path)."""
    launch = program_executor.launch

    def every_frame(prepared, snapshot=None, needs_logprobs: bool = True):
        return launch(prepared, snapshot, needs_logprobs=True)

    monkeypatch.setattr(program_executor, "launch", every_frame)


@pytest.mark.parametrize("speculation", ["off", "adaptive"])
def test_skipping_changes_no_token_and_no_asked_for_logprob(
    model, catalog, speculation, monkeypatch
):
    none_asked, _ = generate(model, catalog, speculation, {})
    tokens, items = generate(model, catalog, speculation, {"b": 3})
    _always_logprobs(monkeypatch)
    every_tokens, every_items = generate(model, catalog, speculation, {"b": 3})
    assert tokens == none_asked == every_tokens
    assert [lp.token_id for lp in items["b"]] == tokens["b"]
    assert not items["a"] and not items["c"]
    for ours, theirs in zip(items["b"], every_items["b"], strict=True):
        # never a stale buffer (another row's or another step's values)
        assert [t for t, _ in ours.top] == [t for t, _ in theirs.top]
        assert ours.logprob == pytest.approx(theirs.logprob, abs=1e-5)
        assert [v for _, v in ours.top] == pytest.approx([v for _, v in theirs.top], abs=1e-5)


def _prefilled_state(model, prompts: list[list[int]]) -> ModelState:
    state = ModelState.allocate(model.config, len(prompts), 8, 64, 4)
    contiguous_pages(state)
    for slot, prompt in enumerate(prompts):
        capacity = PackedCapacity.mixed(1, 1, 64)
        inputs = PackedInputs.build(capacity, [prompt], [slot], prefill_row=0)
        step.run_step(model, state, inputs, capacity, DeviceSampling.greedy(1))
    return state


def test_a_step_without_logprobs_computes_the_same_bits_otherwise(model):
    """One decode step of two rows from two equal states, with and without logprobs: the
    same tokens, logits and every state tensor (scratch rows included), bit for bit."""
    prompts = [PROMPTS["a"], PROMPTS["b"]]
    states = [_prefilled_state(model, prompts) for _ in range(2)]
    capacity = PackedCapacity.mixed(2, 1, 0)
    outs = [
        step.run_step(
            model, state, PackedInputs.build(capacity, [[40], [41]], [0, 1]), capacity,
            DeviceSampling.greedy(2), needs_logprobs=needs,
        )
        for state, needs in zip(states, (True, False), strict=True)
    ]  # fmt: skip
    assert outs[0].logprobs is not None and outs[1].logprobs is None
    assert torch.equal(outs[0].next_tokens, outs[1].next_tokens)
    assert torch.equal(outs[0].target.logits, outs[1].target.logits)
    with_lp, without = [], []
    map_tensors(states[0], with_lp.append)
    map_tensors(states[1], without.append)
    assert len(with_lp) == len(without) > 0
    assert all(torch.equal(a, b) for a, b in zip(with_lp, without, strict=True))
