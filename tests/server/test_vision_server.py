"""Issue 13 deliverable 5 through the real server: a random tiny Qwen3.5 with vision saved by
transformers answers a two-image chat request (base64 data URLs) exactly as transformers'
greedy ``generate`` does on the same inputs, streaming and not; the prompt is long enough to
be prefilled in several chunks, with an image placed where a plain cut would split it, and
both requests run at once (mixed prompt + decode frames, speculative decoding with MTP).
The case (``vision_case``, tests/conftest.py) is built in tests/server/vision_checkpoint.py."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.server.conftest import running_server
from tests.server.vision_checkpoint import IMAGES, NUM_TOKENS, content, data_url

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def served(vision_case):
    """(server url, transformers' greedy tokens, the expanded prompt length, tokenizer)."""
    bundle, expected, expanded, _, tokenizer = vision_case
    with running_server(bundle, "serve", "--max-context", "2048") as url:
        yield url, expected, len(expanded), tokenizer


def ask(url: str, stream: bool, urls: list[str] | None = None) -> tuple[str, dict]:
    body = {
        "messages": [{"role": "user", "content": content(urls)}],
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


def test_a_prompt_whose_images_need_two_vision_windows_answers_the_same(vision_case, tmp_path):
    """8 features of storage: the 8-feature image fills the first window, the second
    image is served after a private snapshot and a restore into a fresh generation. The
    second image comes as a file:// URL inside --allowed-local-media-path."""
    bundle, expected, expanded, _, tokenizer = vision_case
    IMAGES[1].save(tmp_path / "second.png")
    urls = [data_url(IMAGES[0]), f"file://{tmp_path / 'second.png'}"]
    flags = ["--vision-feature-capacity", "8", "--allowed-local-media-path", str(tmp_path)]
    with running_server(bundle, "serve", "--max-context", "2048", *flags) as url:
        text, usage = ask(url, stream=True, urls=urls)
    assert text == tokenizer.decode(expected, skip_special_tokens=True)
    assert usage["prompt_tokens"] == len(expanded)
