"""Issue 13 deliverable 5 through the real server: a random tiny Qwen3.5 with vision saved by
transformers answers a two-image chat request (base64 data URLs) exactly as transformers'
greedy ``generate`` does on the same inputs, streaming and not; the prompt is long enough to
be prefilled in several chunks, with an image placed where a plain cut would split it, and
both requests run at once (mixed prompt + decode frames, speculative decoding with MTP)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
import torch
from click.testing import CliRunner
from tokenizers import Tokenizer

from ignition.cli import main
from ignition.model.vision.preprocess import prepare_image
from ignition.runtime.image_inputs import expand_request
from tests.server.conftest import running_server
from tests.server.vision_checkpoint import (
    IMAGE,
    PLACEHOLDER,
    PROCESSING,
    data_url,
    noise_image,
    write_vision_checkpoint,
)

pytest.importorskip("transformers")

NUM_TOKENS = 12
EOS = 2
IMAGES = [noise_image(20, 28, seed=3), noise_image(16, 12, seed=4)]
# ~120 text tokens between the images: the second image's span crosses the 128-token chunk
TEXTS = ["Look at this: ", " and then, after a long story, " + "once upon a time " * 19, " ok?"]


def content() -> list[dict]:
    parts: list[dict] = [{"type": "text", "text": TEXTS[0]}]
    for image, text in zip(IMAGES, TEXTS[1:], strict=True):
        parts.append({"type": "image_url", "image_url": {"url": data_url(image)}})
        parts.append({"type": "text", "text": text})
    return parts


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(server url, transformers' greedy tokens, the expanded prompt length, tokenizer)."""
    weights = tmp_path_factory.mktemp("vision-weights")
    reference = write_vision_checkpoint(weights)
    bundle = tmp_path_factory.mktemp("vision-bundle")
    args = ["build", "--weights", str(weights), "--out", str(bundle), "--device", "cpu"]
    args += ["--max-prefill-chunk", "128", "--concurrency", "2", "--mixed-prefill"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    tokenizer = Tokenizer.from_file(str(weights / "tokenizer.json"))
    text = "".join([TEXTS[0], PLACEHOLDER, TEXTS[1], PLACEHOLDER, TEXTS[2]])
    rendered = f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
    ids = tokenizer.encode(rendered, add_special_tokens=False).ids
    prepared = [prepare_image(image, PROCESSING) for image in IMAGES]
    expanded, images = expand_request(ids, prepared, IMAGE, PROCESSING.merge_size)
    assert any(s.start < 128 < s.stop for s in images.spans), "no image at the chunk boundary"
    ids_t = torch.tensor([expanded])
    with torch.no_grad():
        out = reference.generate(
            input_ids=ids_t,
            attention_mask=torch.ones_like(ids_t),
            mm_token_type_ids=(ids_t == IMAGE).int(),
            pixel_values=torch.from_numpy(np.concatenate([p.pixels for p in prepared])),
            image_grid_thw=torch.tensor([[p.grid.t, p.grid.h, p.grid.w] for p in prepared]),
            max_new_tokens=NUM_TOKENS,
            do_sample=False,
        )
    expected = out[0, len(expanded) :].tolist()
    if EOS in expected:
        expected = expected[: expected.index(EOS)]
    with running_server(bundle, "serve", "--max-context", "2048") as url:
        yield url, expected, len(expanded), tokenizer


def ask(url: str, stream: bool) -> tuple[str, dict]:
    body = {
        "messages": [{"role": "user", "content": content()}],
        "max_tokens": NUM_TOKENS,
        "temperature": 0,
        "stream": stream,
        "stream_options": {"include_usage": True} if stream else None,
    }
    if not stream:
        r = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=300)
        assert r.status_code == 200, r.text
        return r.json()["choices"][0]["message"]["content"], r.json()["usage"]
    text, usage = "", {}
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=300) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[len("data: ") :])
            for choice in chunk["choices"]:
                text += choice["delta"].get("content") or ""
            usage = chunk.get("usage") or usage
    return text, usage


def test_two_image_chat_request_answers_as_transformers_generate_streaming_and_not(served):
    url, expected, num_prompt, tokenizer = served
    with ThreadPoolExecutor(2) as pool:  # at once: one's prompt chunks beside the other's decode
        answers = list(pool.map(lambda stream: ask(url, stream), [False, True]))
    for text, usage in answers:
        assert text == tokenizer.decode(expected, skip_special_tokens=True)
        assert usage["prompt_tokens"] == num_prompt  # one token per image feature
        assert usage["completion_tokens"] == len(expected) + (len(expected) < NUM_TOKENS)


def test_a_remote_image_url_is_a_400_saying_fetching_is_disabled(served):
    url = served[0]
    part = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, part]}]}
    r = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["param"] == "messages[0].content[1].image_url"
    assert "fetching remote image URLs is disabled" in error["message"]
