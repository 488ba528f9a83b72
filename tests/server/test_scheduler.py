"""A real `ignition serve` process, four request slots, a 4096-token prefill capacity.

For ordinary, fixed-width and adaptive speculative execution the server must give
complete responses for concurrent long prompts, two and four decode streams, a long
prompt arriving during decode, short/long prompt contention, and cancellation followed
by slot reuse. Each test prints actual prompt/output token counts, client SSE arrival
gaps and the server's graph-counter deltas. SSE gaps are not GPU execution times.

The model is a small random checkpoint: requests set ``ignore_eos`` so that output
lengths are exact whatever the weights sample.
"""

from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from tests.server.conftest import running_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

LONG_PROMPT = "def handler(request):\n    return request.args\n" * 170  # > 3000 tokens
SHORT_PROMPT = "import os\n"


@pytest.fixture(scope="module", params=["off", "fixed", "adaptive"])
def server(request, bundle):
    flags = ("--tool-call-parser", "hermes", "--enable-auto-tool-choice")
    with running_server(bundle, "serve", "--speculation", request.param, *flags) as url:
        print(f"\n[{request.param}] server on {url}")
        yield url, request.param


def graph_counters(url: str) -> dict[str, float]:
    text = httpx.get(f"{url}/metrics").text
    pattern = (
        r'^flare_scheduler_executions_total\{class="\w+",kind="(\w+)",model_name="[^"]*"\} '
        r"([0-9.e+]+)$"
    )
    counts: dict[str, float] = {}
    for kind, v in re.findall(pattern, text, re.M):
        counts[kind] = counts.get(kind, 0.0) + float(v)
    return counts


def counter(url: str, name: str) -> float:
    match = re.search(rf"^{name} ([0-9.e+]+)$", httpx.get(f"{url}/metrics").text, re.M)
    return float(match.group(1)) if match else 0.0


def gauge(url: str, name: str) -> float:
    """A gauge of the /metrics page, labelled (model_name) or not."""
    return counter(url, rf"{name}(?:\{{[^}}]*\}})?")


def wait_for(condition, what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def report(label: str, url: str, before: dict[str, float], results: list[dict]) -> None:
    after = graph_counters(url)
    delta = {k: int(after.get(k, 0) - before.get(k, 0)) for k in after}
    for r in results:
        gaps = r.get("gaps_ms", [])
        gap_text = f" max SSE gap {max(gaps):.1f} ms" if gaps else ""
        print(
            f"  {label}: prompt={r['prompt_tokens']} output={r['completion_tokens']}"
            f" finish={r['finish_reason']}{gap_text}"
        )
    print(f"  {label}: graph executions {delta}")


def stream_completion(url: str, prompt: str, max_tokens: int, cancel_after: int | None = None):
    """One streamed completion; returns counts, text and client-side SSE arrival gaps."""
    payload = {
        "prompt": prompt,
        "max_tokens": max_tokens,
        "stream": True,
        "ignore_eos": True,
        "temperature": 0,
        "stream_options": {"include_usage": True},
    }
    text, gaps, last, finish, usage, events = "", [], None, None, None, 0
    with httpx.stream("POST", f"{url}/v1/completions", json=payload, timeout=300) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            now = time.monotonic()
            if last is not None:
                gaps.append((now - last) * 1000)
            last = now
            if line == "data: [DONE]":
                break
            event = json.loads(line[6:])
            if event.get("usage"):
                usage = event["usage"]
            for choice in event["choices"]:
                text += choice["text"]
                finish = choice["finish_reason"] or finish
            events += 1
            if cancel_after is not None and events >= cancel_after:
                return {
                    "prompt_tokens": -1,
                    "completion_tokens": events,
                    "text": text,
                    "finish_reason": "client-cancelled",
                    "gaps_ms": gaps,
                }
    return {
        "prompt_tokens": usage["prompt_tokens"],
        "completion_tokens": usage["completion_tokens"],
        "text": text,
        "finish_reason": finish,
        "gaps_ms": gaps,
    }


def complete(url: str, prompt: str, max_tokens: int) -> dict:
    response = httpx.post(
        f"{url}/v1/completions",
        timeout=300,
        json={"prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    return {
        **body["usage"],
        "finish_reason": body["choices"][0]["finish_reason"],
        "text": body["choices"][0]["text"],
    }


def test_concurrent_long_prompts_complete(server):
    url, mode = server
    before = graph_counters(url)
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda p: complete(url, p, 8), [LONG_PROMPT, LONG_PROMPT + "x"]))
    report(f"{mode} long prompts", url, before, results)
    for r in results:
        assert r["prompt_tokens"] > 3000
        assert r["completion_tokens"] == 8 and r["finish_reason"] == "length"


@pytest.mark.parametrize("num_streams", [2, 4])
def test_decode_streams_complete(server, num_streams):
    url, mode = server
    before = graph_counters(url)
    prompts = [f"{SHORT_PROMPT}# stream {i}\n" for i in range(num_streams)]
    with ThreadPoolExecutor(num_streams) as pool:
        results = list(pool.map(lambda p: stream_completion(url, p, 24), prompts))
    report(f"{mode} {num_streams} streams", url, before, results)
    for r in results:
        assert r["completion_tokens"] == 24 and r["finish_reason"] == "length"


def test_long_prompt_arriving_during_decode_completes(server):
    url, mode = server
    before = graph_counters(url)
    with ThreadPoolExecutor(3) as pool:
        streams = [pool.submit(stream_completion, url, f"{SHORT_PROMPT}{i}", 40) for i in range(2)]
        time.sleep(0.5)
        late = pool.submit(complete, url, LONG_PROMPT, 6)
        results = [f.result() for f in streams] + [late.result()]
    report(f"{mode} long prompt during decode", url, before, results)
    assert [r["completion_tokens"] for r in results] == [40, 40, 6]


def test_short_and_long_prompts_contend_and_both_complete(server):
    url, mode = server
    before = graph_counters(url)
    with ThreadPoolExecutor(2) as pool:
        long = pool.submit(stream_completion, url, LONG_PROMPT, 12)
        short = pool.submit(stream_completion, url, SHORT_PROMPT, 12)
        results = [long.result(), short.result()]
    report(f"{mode} short/long contention", url, before, results)
    assert all(r["completion_tokens"] == 12 for r in results)


def test_cancellation_frees_the_slot_for_reuse(server):
    """Cancellation stops further selection; the slot and its pages come back once its
    last submitted fence completes, so a new request reuses the slot while the other
    three still run, and nothing stays held when everything has finished."""
    url, mode = server
    before = graph_counters(url)
    abort_series = r'flare_requests_total\{finish_reason="abort",model_name="[^"]*"\}'
    aborted = counter(url, abort_series)
    assert gauge(url, "flare_request_slots") == 4
    with ThreadPoolExecutor(4) as pool:
        # Fill all four slots with long generations, then drop one client mid-stream.
        long_runs = [
            pool.submit(stream_completion, url, f"{SHORT_PROMPT}{i}", 400) for i in range(3)
        ]
        cancelled = stream_completion(url, SHORT_PROMPT, 400, cancel_after=3)
        wait_for(
            lambda: counter(url, abort_series) > aborted,
            "the disconnect never cancelled the request",
        )
        wait_for(
            lambda: gauge(url, "flare_request_slots_used") <= 3,
            "the cancelled request still holds its slot",
        )
        reused = complete(url, "x = 1\n", 5)  # needs the cancelled request's slot
        still_running = sum(not f.done() for f in long_runs)
        results = [cancelled, reused] + [f.result() for f in long_runs]
    report(f"{mode} cancel + reuse", url, before, results)
    print(f"  {mode} cancel + reuse: long runs still streaming at reuse: {still_running}")
    assert reused["completion_tokens"] == 5
    assert all(r["completion_tokens"] == 400 for r in results[2:])
    wait_for(lambda: gauge(url, "flare_request_slots_used") == 0, "a slot leaked")
    wait_for(lambda: gauge(url, "flare_kv_pages_used") == 0, "KV pages leaked")


def test_the_official_openai_client_works(server):
    url, mode = server
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", timeout=120)
    models = client.models.list()
    assert models.data[0].id == "qwen38"
    completion = client.completions.create(
        model="qwen38",
        prompt=SHORT_PROMPT,
        max_tokens=5,
        temperature=0,
        extra_body={"ignore_eos": True},
    )
    assert completion.usage.completion_tokens == 5
    chunks = list(
        client.chat.completions.create(
            model="qwen38",
            messages=[{"role": "user", "content": "hello"}],
            max_tokens=6,
            temperature=0,
            stream=True,
            extra_body={"ignore_eos": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].choices[0].finish_reason == "length"
    print(f"  {mode} openai client: chat streamed {len(chunks)} chunks, {len(text)} chars")
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model="qwen38", prompt="x", max_tokens=0)
    assert "max_tokens" in str(info.value)


def test_the_openai_client_sends_tools_tool_choice_and_chat_template_kwargs(server):
    """The test checkpoint's Qwen3.5-shaped template renders ``tools``: with tool_choice auto
    (this server runs with --enable-auto-tool-choice) and chat_template_kwargs the request is
    served and its tools reach the prompt; tool_choice none leaves them out. (A template
    that never reads ``tools`` answers 400: tests/server/test_no_silent_ignores.py.)"""
    url, _ = server
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", timeout=120)
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    ask = {
        "model": "qwen38",
        "messages": [{"role": "user", "content": "hello"}],
        "tools": [tool],
        "max_tokens": 3,
        "temperature": 0,
        "extra_body": {"ignore_eos": True, "chat_template_kwargs": {"enable_thinking": False}},
    }
    with_tools = client.chat.completions.create(**ask, tool_choice="auto")
    without = client.chat.completions.create(**ask, tool_choice="none")
    assert with_tools.usage.prompt_tokens > without.usage.prompt_tokens
    assert without.usage.completion_tokens == 3
