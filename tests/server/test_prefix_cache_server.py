"""Prefix caching through the real server: a two-turn chat whose second request repeats
the first conversation restores a retained checkpoint (issue 10's done-when).

Prints the second turn's time to first token with retention on and off; those are
SSE arrival times on this CPU, not device timings, and nothing asserts on them.
"""

from __future__ import annotations

import json
import time

import httpx
import pytest

from ignition.runtime.bundle import load_bundle
from ignition.runtime.chat.template import ChatRenderer
from tests.server.conftest import running_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

USER_1 = "def handler(request):\n    return request.args\n" * 12 + "Explain this code."
USER_2 = "Now rewrite it without the repetition."


def _chat(url: str, messages: list[dict]) -> dict:
    """Stream one greedy chat turn; returns its text, usage and time to first token."""
    body = {
        "messages": messages,
        "max_tokens": 12,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    text, usage, first = "", None, None
    began = time.perf_counter()
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=600) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            event = json.loads(line[6:])
            if event.get("usage"):
                usage = event["usage"]
            for choice in event.get("choices", []):
                piece = choice.get("delta", {}).get("content")
                if piece:
                    first = first if first is not None else time.perf_counter() - began
                    text += piece
    return {"text": text, "usage": usage, "ttft_s": first}


def _metric(url: str, name: str) -> float:
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        series = line.split("{", 1)[0].split(" ", 1)[0]  # every series carries model_name
        if series in (name, name + "_total"):
            return float(line.split()[-1])
    return 0.0


def _conversation(url: str) -> tuple[dict, dict, list[dict]]:
    first = _chat(url, [{"role": "user", "content": USER_1}])
    messages = [
        {"role": "user", "content": USER_1},
        {"role": "assistant", "content": first["text"]},
        {"role": "user", "content": USER_2},
    ]
    return first, _chat(url, messages), messages


def _shared_prefix(bundle_path, first_messages, second_messages) -> int:
    bundle = load_bundle(bundle_path, "cpu")
    chat = ChatRenderer(bundle.chat_templates, bundle.encode_rendered, bundle.split_tokens())
    a = chat.render(first_messages).prompt_ids
    b = chat.render(second_messages).prompt_ids
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_a_second_turn_restores_the_first_conversation_and_keeps_greedy_output(bundle):
    with running_server(bundle, "serve", "--speculation", "off", "--snapshot-rows", "4") as url:
        on_1, on_2, messages = _conversation(url)
        hits = _metric(url, "flare_prefix_cache_hits")
        restored = _metric(url, "flare_prefix_cache_restored_tokens")
    with running_server(bundle, "serve", "--speculation", "off", "--snapshot-rows", "0") as url:
        off_1, off_2, _ = _conversation(url)
    shared = _shared_prefix(bundle, messages[:1], messages)
    cached = on_2["usage"]["prompt_tokens_details"]["cached_tokens"]
    print(
        f"\nshared prefix {shared} tokens, cached {cached}; second-turn TTFT "
        f"retention on {on_2['ttft_s'] * 1e3:.1f} ms, off {off_2['ttft_s'] * 1e3:.1f} ms "
        f"(prompt {on_2['usage']['prompt_tokens']} tokens)"
    )
    assert on_1["text"] == off_1["text"] and on_2["text"] == off_2["text"]
    assert cached >= 0.9 * shared
    assert off_2["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert on_1["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert hits == 1 and restored == cached


def _greedy_completion(url: str, prompt, max_tokens: int = 4, n: int = 1) -> tuple[list[str], int]:
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
    r = httpx.post(f"{url}/v1/completions", json={**body, "n": n}, timeout=120).json()
    return [c["text"] for c in r["choices"]], r["usage"]["prompt_tokens_details"]["cached_tokens"]


def test_a_restored_checkpoint_after_batched_prompts_keeps_greedy_output(bundle):
    with running_server(bundle, "serve", "--snapshot-rows", "16") as url:
        _greedy_completion(url, "hi", 2)
        _greedy_completion(url, [10, 11, 12, 13], 4, n=3)
        for prompt in ([1, 2, 3], [4, 5], [[1, 2, 3], [4, 5]]):
            _greedy_completion(url, prompt)
        _greedy_completion(url, ["import os", "def f():"], 3)
        restored, cached = _greedy_completion(url, "import os\n")
    with running_server(bundle, "serve", "--snapshot-rows", "0") as url:
        prefilled, _ = _greedy_completion(url, "import os\n")
    assert cached > 0  # the sequence does reach a restore
    assert restored == prefilled
