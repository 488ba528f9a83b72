"""Issue 15: prompt logprobs (vLLM's ``prompt_logprobs``, completions' ``echo`` with
``logprobs``) through the official ``openai`` client.

The model is a tiny random Qwen3.5 written by transformers' own classes, so every prompt
token's logprob, rank and alternatives are checked against ``log_softmax`` of
transformers' forward over the same prompt. The server runs in-process (the app over an
engine thread, reached through an ASGI transport), once per speculation mode; the prompt
spans three 64-token chunks and shares its frames with a decoding request, so chunked
prefill and the mixed (and mixed speculative) programs' prompt lanes are all scored.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

import httpx
import openai
import pytest
import torch

from ignition.components.capacity import plan_catalog
from ignition.components.program_kinds import GraphKind
from ignition.kernels import use_backend
from ignition.model.weights import load_checkpoint
from ignition.recipes import LoadOptions, get_recipe
from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.async_engine import AsyncEngine
from ignition.runtime.requests.errors import RequestError
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from ignition.server.app import create_app

pytest.importorskip("transformers")

PROMPT = [(37 * i + 11) % 3900 + 20 for i in range(150)]  # three 64-token chunks
TOP = 5
ATOL = 1e-4


class CharDecoder:
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(0x4E00 + i) for i in ids)


def encode(text: str) -> list[int]:
    return [ord(c) % 3000 + 20 for c in text]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """(ignition model, transformers model) of one tiny random Qwen3.5 with an MTP head."""
    from tests.model.hf_checkpoints import Variant, write_qwen35

    path = tmp_path_factory.mktemp("qwen35")
    reference = write_qwen35(path, Variant(multimodal=False, seed=1))
    return load_checkpoint(path).model, reference


@pytest.fixture(scope="module")
def expected(checkpoint):
    """transformers' log_softmax at every prompt position."""
    _, reference = checkpoint
    with torch.no_grad():
        logits = reference(input_ids=torch.tensor([PROMPT]), use_cache=False).logits[0]
    return torch.log_softmax(logits.float(), dim=-1)


@pytest.fixture(scope="module")
def catalog():
    planned = plan_catalog(
        get_recipe("qwen35"), LoadOptions(mixed_prefill=True, max_prefill_chunk=64)
    )
    text_only = tuple(d for d in planned.descriptors if d.kind is not GraphKind.VISION)
    return dataclasses.replace(planned, descriptors=text_only)


@pytest.fixture(autouse=True)
def reference_kernels():
    with use_backend("reference"):
        yield


def serve(checkpoint, catalog, speculation: str, snapshot_rows: int = 0):
    model, _ = checkpoint
    options = RuntimeOptions(
        num_slots=4,
        page_size=16,
        max_context_tokens=512,
        speculation=speculation,
        snapshot_rows=snapshot_rows,
    )
    engine = assemble_engine(model, catalog, CharDecoder(), [2], options)
    return AsyncEngine(engine, model_name="tiny", encode=encode, idle_poll_s=0.005)


async def _with_client(engine: AsyncEngine, work):
    engine.start()
    transport = httpx.ASGITransport(app=create_app(engine))
    http = httpx.AsyncClient(transport=transport, base_url="http://test", timeout=120)
    client = openai.AsyncOpenAI(
        base_url="http://test/v1", api_key="none", http_client=http, max_retries=0
    )
    try:
        return await work(client)
    finally:
        await http.aclose()
        engine.stop()


def run(engine: AsyncEngine, work):
    return asyncio.run(_with_client(engine, work))


async def _alongside_a_decoder(client, request):
    """``request`` while another request decodes, so the prompt shares mixed frames."""
    other = asyncio.ensure_future(
        client.completions.create(
            model="tiny", prompt=[5, 6, 7], max_tokens=60, temperature=0,
            extra_body={"ignore_eos": True},
        )
    )  # fmt: skip
    await asyncio.sleep(0.05)
    try:
        return await request
    finally:
        await other


def _completion(client, stream: bool = False, **extra):
    return client.completions.create(
        model="tiny",
        prompt=PROMPT,
        max_tokens=3,
        temperature=0,
        stream=stream,
        extra_body={"ignore_eos": True, **extra},
    )


def check_position(expected, position: int, entry: dict):
    """vLLM's entry at prompt token ``position``: the token itself first, then the top."""
    token = PROMPT[position]
    row = expected[position - 1]
    got = {int(t): v for t, v in entry.items()}
    assert next(iter(got)) == token
    assert got[token]["logprob"] == pytest.approx(float(row[token]), abs=ATOL)
    # Rank 1 is the best; logprobs within ATOL of the token's are ties that either side's
    # rounding may order differently, so the rank lies between the strict and loose counts.
    value = float(row[token])
    assert (
        int((row > value + ATOL).sum()) + 1
        <= got[token]["rank"]
        <= int((row >= value - ATOL).sum())
    )
    assert got[token]["decoded_token"] == CharDecoder().decode([token])
    top = row.topk(TOP)
    for rank, (value, t) in enumerate(zip(top.values.tolist(), top.indices.tolist(), strict=True)):
        assert got[t]["logprob"] == pytest.approx(value, abs=ATOL)
        if t != token:
            assert got[t]["rank"] == rank + 1
    assert len(got) == TOP + (token not in top.indices.tolist())


@pytest.mark.parametrize("speculation", ["off", "fixed", "adaptive"])
def test_prompt_logprobs_equal_transformers_log_softmax_with_speculation(
    checkpoint, catalog, expected, speculation
):
    engine = serve(checkpoint, catalog, speculation)
    response = run(engine, lambda c: _alongside_a_decoder(c, _completion(c, prompt_logprobs=TOP)))
    scores = response.choices[0].model_extra["prompt_logprobs"]
    assert len(scores) == len(PROMPT) and scores[0] is None
    for position in range(1, len(PROMPT)):
        check_position(expected, position, scores[position])


@pytest.mark.parametrize("speculation", ["off", "fixed", "adaptive"])
def test_echo_with_logprobs_starts_with_the_prompt_tokens_streamed_and_not(
    checkpoint, catalog, expected, speculation
):
    async def both(client):
        plain = await _completion(client, echo=True, logprobs=2)
        stream = await _completion(client, stream=True, echo=True, logprobs=2)
        chunks = [c async for c in stream]
        return plain, chunks

    plain, chunks = run(serve(checkpoint, catalog, speculation), both)
    logprobs = plain.choices[0].logprobs
    prompt_text = [CharDecoder().decode([t]) for t in PROMPT]
    assert logprobs.tokens[: len(PROMPT)] == prompt_text
    assert logprobs.token_logprobs[0] is None and logprobs.top_logprobs[0] is None
    want = [float(expected[i - 1, PROMPT[i]]) for i in range(1, len(PROMPT))]
    assert logprobs.token_logprobs[1 : len(PROMPT)] == pytest.approx(want, abs=ATOL)
    assert all(len(top) >= 2 for top in logprobs.top_logprobs[1:])
    assert logprobs.text_offset[: len(PROMPT)] == list(range(len(PROMPT)))
    assert len(logprobs.tokens) == len(PROMPT) + 3  # the prompt, then the output
    assert plain.choices[0].model_extra["prompt_logprobs"][0] is None
    streamed = [c.choices[0] for c in chunks if c.choices]
    echo = streamed[0]
    assert echo.text == "".join(prompt_text)
    assert echo.logprobs.token_logprobs == logprobs.token_logprobs[: len(PROMPT)]
    output = [lp for c in streamed[1:] if c.logprobs for lp in c.logprobs.token_logprobs]
    assert output == pytest.approx(logprobs.token_logprobs[len(PROMPT) :], abs=ATOL)


def test_chat_prompt_logprobs_come_on_the_response_as_vllm_returns_them(checkpoint, catalog):
    messages = [{"role": "user", "content": "def f(x): return x"}]

    async def chat(client):
        return await client.chat.completions.create(
            model="tiny", messages=messages, max_tokens=2, temperature=0,
            extra_body={"prompt_logprobs": 1},
        )  # fmt: skip

    engine = serve(checkpoint, catalog, "off")
    response = run(engine, chat)
    prompt = engine.render_chat(messages).prompt_ids
    scores = response.model_extra["prompt_logprobs"]
    assert len(scores) == len(prompt) and scores[0] is None
    assert all(str(prompt[i]) in scores[i] for i in range(1, len(prompt)))


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"prompt_logprobs": -1}, "greater than or equal to 0"),
        ({"prompt_logprobs": 21}, "less than or equal to 20"),
        ({"prompt_logprobs": 2, "stream": True}, "not available when `stream=True`"),
    ],
)
def test_bad_prompt_logprobs_are_a_400_naming_the_field(checkpoint, catalog, body, needle):
    async def bad(client):
        with pytest.raises(openai.BadRequestError) as err:
            await client.completions.create(
                model="tiny", prompt=[5, 6], max_tokens=2, extra_body=body
            )
        return err.value

    err = run(serve(checkpoint, catalog, "off"), bad)
    assert err.body["param"] == "prompt_logprobs"
    assert needle in err.body["message"]


def test_a_prompt_logprobs_request_never_restores_a_retained_prefix(checkpoint, catalog, expected):
    """vLLM skips prefix caching for prompt-logprobs requests; so does the engine: the
    second request repeats the first one's prompt (a retained checkpoint at its message
    end) and still prefills, and scores, every position."""
    engine = serve(checkpoint, catalog, "off", snapshot_rows=4).engine
    ends = (len(PROMPT) - 4,)

    def submit(name: str, **sampling) -> list:
        chunks: list = []
        params = SamplingParams(max_tokens=2, temperature=0, ignore_eos=True, **sampling)
        engine.submit(GenerationRequest(name, tuple(PROMPT), params, ends), chunks.append)
        engine.run_until_idle(max_steps=3000)
        return chunks

    submit("first")
    assert submit("plain")[-1].num_cached_tokens > 0  # the prefix is retained
    scored = submit("scored", prompt_logprobs=0)
    assert scored[-1].num_cached_tokens == 0
    entries = scored[0].prompt_logprobs
    want = [float(expected[i - 1, PROMPT[i]]) for i in range(1, len(PROMPT))]
    assert [e.logprob for e in entries[1:]] == pytest.approx(want, abs=ATOL)
    assert all(e.top == () for e in entries[1:])


def test_prompt_logprobs_for_a_prompt_with_images_are_refused_at_submit(checkpoint, catalog):
    """Vision windows restore their boundaries from snapshots, which hold no hidden states."""
    engine = serve(checkpoint, catalog, "off").engine
    request = GenerationRequest("img", (5, 6), SamplingParams(prompt_logprobs=1))
    with pytest.raises(RequestError, match="images"):
        engine.submit(dataclasses.replace(request, images=object()), lambda chunk: None)
