"""Issue 15: penalties, logit_bias, min_tokens and logprobs through the real runtime.

The prepared programs process logits on the device, batched per row; these tests drive
the engine (Helios, worker, programs) over a tiny random model and compare with a
reference that decodes one token at a time and applies vLLM's rules on the host, and
speculation on with speculation off (every verified position must be processed as
ordinary sampling would process it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest
import torch

from ignition.helios import LaneRole
from ignition.kernels import use_backend
from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors as DeviceSampling
from ignition.model.state import ModelState, contiguous_pages
from ignition.model.step import run_step
from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.loop.faults import InjectedFault
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from tests.runtime.tiny import tiny_catalog

EOS = 2
PROMPTS = {"short": [5, 9, 11, 17, 9], "repeat": [7, 7, 7, 8, 9] * 8}
PENALTIES = dict(repetition_penalty=1.6, frequency_penalty=0.8, presence_penalty=0.4)


class CharDecoder:
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(0x4E00 + i) for i in ids)


@pytest.fixture(scope="module")
def catalog():
    return tiny_catalog(max_prefill_chunk=64)


pytestmark = pytest.mark.usefixtures("reference_kernels")


def generate(
    model, catalog, speculation: str, eos=(EOS,), prompts=PROMPTS, processed=True, **sampling
):
    """Every prompt at once through one engine; returns (chunks by prompt name, engine).
    ``processed`` False proposes MTP drafts from the raw draft logits."""
    options = RuntimeOptions(
        num_slots=4,
        page_size=64,
        max_context_tokens=512,
        speculation=speculation,
        drafts_from_processed_logits=processed,
    )
    engine = assemble_engine(model, catalog, CharDecoder(), list(eos), options)
    chunks = {name: [] for name in prompts}
    params = {"max_tokens": 10, "temperature": 0.0, "ignore_eos": True} | sampling
    for name, prompt in prompts.items():
        request = GenerationRequest(name, tuple(prompt), SamplingParams(**params))
        engine.submit(request, chunks[name].append)
    engine.run_until_idle(max_steps=3000)
    return chunks, engine


def tokens_of(chunks) -> list[int]:
    return [t for c in chunks for t in c.token_ids]


@torch.no_grad()
def reference(model, prompt: list[int], num_tokens: int, rep=1.0, freq=0.0, pres=0.0,
              bias=()):  # fmt: skip
    """Greedy decoding one token per step with vLLM's processing applied on the host."""
    config = model.config
    state = ModelState.allocate(
        config, num_slots=1, num_pages=16, page_size=64, max_pages_per_slot=16
    )
    contiguous_pages(state)
    capacity = PackedCapacity.mixed(1, 1, 64)
    output: list[int] = []
    raw_logprobs: list[float] = []
    chunk = prompt
    while len(output) < num_tokens:
        is_prompt = not output
        inputs = PackedInputs.build(capacity, [chunk], [0], prefill_row=0 if is_prompt else -1)
        out = run_step(model, state, inputs, capacity, DeviceSampling.greedy(1))
        logits = out.target.logits_at(torch.tensor([len(chunk) - 1]))[0].float()
        processed = logits.clone()
        for t, b in bias:
            processed[t] += b
        for t in set(prompt) | set(output):
            processed[t] = processed[t] / rep if processed[t] > 0 else processed[t] * rep
        for t, count in Counter(output).items():
            processed[t] -= freq * count + pres
        token = int(processed.argmax())
        raw_logprobs.append(float(torch.log_softmax(logits, -1)[token]))
        output.append(token)
        chunk = [token]
    return output, raw_logprobs


@pytest.fixture(scope="module")
def plain(model, catalog):
    """Greedy tokens with no processing, speculation off."""
    with use_backend("reference"):
        chunks, _ = generate(model, catalog, "off")
    return {name: tokens_of(c) for name, c in chunks.items()}


@pytest.fixture(scope="module")
def penalized(model, catalog):
    """Greedy tokens with PENALTIES, speculation off."""
    with use_backend("reference"):
        chunks, _ = generate(model, catalog, "off", **PENALTIES)
    return {name: tokens_of(c) for name, c in chunks.items()}


def test_greedy_penalties_match_vllms_rules_decoded_one_token_at_a_time(model, penalized):
    for name, prompt in PROMPTS.items():
        expected, _ = reference(model, prompt, 10, rep=1.6, freq=0.8, pres=0.4)
        assert penalized[name] == expected, name


def test_penalties_change_greedy_output(plain, penalized):
    assert plain != penalized


@pytest.mark.parametrize("speculation", ["fixed", "adaptive"])
def test_greedy_with_penalties_is_the_same_with_speculation_on_and_off(
    model, catalog, penalized, speculation
):
    on, engine = generate(model, catalog, speculation, **PENALTIES)
    assert {n: tokens_of(c) for n, c in on.items()} == penalized
    assert engine.stats.snapshot().speculative_rounds > 0


def _acceptance(engine) -> float:
    stats = engine.stats.snapshot()
    return stats.speculative_accepted_tokens / max(1, stats.speculative_draft_tokens)


@pytest.mark.parametrize("speculation", ["fixed", "adaptive"])
def test_mtp_drafts_are_proposed_from_processed_logits_so_a_bias_the_target_obeys_is_accepted(
    model, catalog, speculation
):
    """Issue 15: a logit bias makes the target emit one token; drafts from the processed
    draft logits propose it too and are all accepted, drafts from unprocessed ones are
    rejected, and the output is the same either way."""
    bias = {"logit_bias": ((40, 100.0),), "max_tokens": 12}
    processed, engine = generate(model, catalog, speculation, **bias)
    unprocessed, before = generate(model, catalog, speculation, processed=False, **bias)
    assert {n: tokens_of(c) for n, c in processed.items()} == {n: [40] * 12 for n in PROMPTS}
    assert {n: tokens_of(c) for n, c in unprocessed.items()} == {n: [40] * 12 for n in PROMPTS}
    assert _acceptance(engine) == 1.0 and _acceptance(before) < 0.5


def test_logit_bias_moves_greedy_decoding_to_the_biased_token(model, catalog, plain):
    first = plain["short"][0]
    chunks, _ = generate(model, catalog, "off", logit_bias=((first, -100.0), (40, 100.0)))
    tokens = tokens_of(chunks["short"])
    assert first not in tokens[:1] and tokens == [40] * 10


def test_min_tokens_holds_back_eos_until_that_many_tokens(model, catalog, plain):
    early = plain["short"][1]  # pretend the second greedy token is EOS
    stopped, _ = generate(model, catalog, "off", eos=(early,), ignore_eos=False)
    assert len(tokens_of(stopped["short"])) == 2
    held, _ = generate(model, catalog, "off", eos=(early,), ignore_eos=False, min_tokens=6)
    tokens = tokens_of(held["short"])
    assert len(tokens) >= 6 and early not in tokens[:5]


def test_min_tokens_holds_back_stop_token_ids_too(model, catalog, plain):
    stop = plain["short"][0]
    chunks, _ = generate(model, catalog, "off", stop_token_ids=(stop,), min_tokens=4)
    tokens = tokens_of(chunks["short"])
    assert len(tokens) >= 4 and stop not in tokens[:3]


@pytest.mark.parametrize("speculation", ["off", "adaptive"])
def test_logprobs_are_the_raw_logprobs_of_each_emitted_token(model, catalog, speculation):
    chunks, _ = generate(model, catalog, speculation, logprobs=3, **PENALTIES)
    for name, prompt in PROMPTS.items():
        items = [lp for c in chunks[name] for lp in c.logprobs]
        assert [lp.token_id for lp in items] == tokens_of(chunks[name])
        _, expected = reference(model, prompt, 10, rep=1.6, freq=0.8, pres=0.4)
        assert [lp.logprob for lp in items] == pytest.approx(expected, abs=1e-4)
        for lp in items:
            assert len(lp.top) == 3
            values = [v for _, v in lp.top]
            assert values == sorted(values, reverse=True) and values[0] >= lp.logprob - 1e-5


def test_requests_without_logprobs_get_none(model, catalog):
    chunks, _ = generate(model, catalog, "off", prompts={"short": PROMPTS["short"]})
    assert all(not c.logprobs for cs in chunks.values() for c in cs)


class FailSharedFrameOnce:
    """Wraps a worker: the first frame holding both named requests fails at wait, as a
    device error would. Helios may give a newcomer's prompt a frame of its own or share it
    with a decode (that depends on measured timings), but two decoders soon share one, so
    the restart these tests need happens whatever shapes are picked."""

    def __init__(self, inner, names: tuple[str, str]) -> None:
        self.inner = inner
        self.names = set(names)
        self.fired = False

    def launch(self, plan, fence, live):
        held = {
            live[lane.handle].request.request_id
            for lane in plan.lanes
            if lane.handle in live and lane.role is not LaneRole.INIT
        }
        fail = not self.fired and self.names <= held
        self.fired = self.fired or fail
        return self.inner.launch(plan, fence, live), fail

    def wait(self, pending):
        launched, fail = pending
        result = self.inner.wait(launched)
        if fail:
            raise InjectedFault("injected wait fault for a shared frame")
        return result

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


# speculation off: one token per frame, so "a" still decodes when it shares one with "b"
RESTART_OPTIONS = RuntimeOptions(
    num_slots=4, page_size=64, max_context_tokens=512, speculation="off"
)


def _restarted(model, catalog, params: SamplingParams):
    """Request "a" (the repeat prompt) generates with ``params``; after two tokens "b"
    arrives, and the first frame holding both fails, so both restart. Returns a's chunks
    and the engine."""
    engine = assemble_engine(model, catalog, CharDecoder(), [EOS], RESTART_OPTIONS)
    engine.worker = FailSharedFrameOnce(engine.worker, ("a", "b"))
    chunks: list = []
    prompt = tuple(PROMPTS["repeat"])
    engine.submit(GenerationRequest("a", prompt, params), chunks.append)
    while len(tokens_of(chunks)) < 2:
        engine.step()
    other = GenerationRequest("b", (5, 3, 4), SamplingParams(max_tokens=12, ignore_eos=True))
    engine.submit(other, lambda chunk: None)
    engine.run_until_idle(max_steps=3000)
    return chunks, engine


def test_a_restarted_request_counts_its_replayed_output_as_output(
    model, catalog, penalized, caplog
):
    """A failed shared frame restarts its requests from prompt + output so far; the
    penalties must see that output as output, so the tokens do not change."""
    params = {"max_tokens": 10, "temperature": 0.0, "ignore_eos": True} | PENALTIES
    chunks, engine = _restarted(model, catalog, SamplingParams(**params))
    assert "a: restarting after a failed frame" in caplog.text
    assert tokens_of(chunks) == penalized["repeat"]
    # The restarted request's slot history holds its whole output, replay included.
    history = next(iter(engine.worker.programs.values()))[0].history
    expected = torch.zeros(model.config.vocab_size, dtype=torch.int32)
    for token in tokens_of(chunks):
        expected[token] += 1
    slots = [s for s in range(4) if torch.equal(history.output_counts[s], expected)]
    assert len(slots) == 1 and history.num_output[slots[0]] == 10


def test_a_restarted_request_sends_its_prompt_logprobs_once_and_unchanged(model, catalog, caplog):
    """A restart replays prompt + output as a new prompt, which scores the prompt again:
    the client still gets the prompt logprobs once, on the first chunk, as without it."""
    params = SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True, prompt_logprobs=2)
    prompt = tuple(PROMPTS["repeat"])
    calm = assemble_engine(model, catalog, CharDecoder(), [EOS], RESTART_OPTIONS)
    expected: list = []
    calm.submit(GenerationRequest("a", prompt, params), expected.append)
    calm.run_until_idle(max_steps=3000)
    chunks, _ = _restarted(model, catalog, params)
    assert "a: restarting after a failed frame" in caplog.text
    assert tokens_of(chunks) == tokens_of(expected)
    carried = [c.prompt_logprobs for c in chunks if c.prompt_logprobs is not None]
    assert carried == [expected[0].prompt_logprobs] and chunks[0].prompt_logprobs is not None


def test_stop_strings_count_only_after_min_tokens_as_in_vllm(model, catalog, plain):
    stop = CharDecoder().decode([plain["short"][1]])
    stopped, _ = generate(model, catalog, "off", stop=(stop,))
    assert len(tokens_of(stopped["short"])) == 2
    held, _ = generate(model, catalog, "off", stop=(stop,), min_tokens=5)
    chunks = held["short"]
    # The occurrence inside the first five tokens is shown; none follows, so it runs out.
    assert tokens_of(chunks) == plain["short"]
    assert "".join(c.text for c in chunks) == CharDecoder().decode(plain["short"])
    assert chunks[-1].finish_reason == "length"


@pytest.mark.parametrize("speculation", ["off", "adaptive"])
def test_a_stop_token_id_ends_the_request_in_the_frames_own_record(
    model, catalog, plain, speculation
):
    """Like EOS, a stop token id ends the request where the frame reports it: Helios gets
    a finished record ending at the stop and serves the request no further frame."""
    stop = plain["short"][2]
    options = RuntimeOptions(num_slots=4, page_size=64, max_context_tokens=512,
                             speculation=speculation)  # fmt: skip
    engine = assemble_engine(model, catalog, CharDecoder(), [EOS], options)
    reports, complete = [], engine.scheduler.complete

    def recording(fence, report):
        reports.append(report)
        return complete(fence, report)

    engine.scheduler.complete = recording
    chunks = []
    params = SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True, stop_token_ids=(stop,))
    engine.submit(GenerationRequest("short", tuple(PROMPTS["short"]), params), chunks.append)
    engine.run_until_idle(max_steps=3000)
    records = [r for report in reports for r in report.records if r.token_ids]
    assert records[-1].is_finished and records[-1].token_ids[-1] == stop
    assert not any(r.is_finished for r in records[:-1])
    assert tokens_of(chunks) == plain["short"][:3]  # the stop token counts as generated
