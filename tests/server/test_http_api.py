"""The HTTP layer alone: OpenAI bodies, SSE framing, error mapping, cancellation.

The engine here is a scripted stand-in so that the API contract is tested
without a model; tests/server/test_scheduler.py runs the real server.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from ignition.runtime.chat_template import RenderedChat
from ignition.runtime.generation_config import GenerationDefaults
from ignition.runtime.requests import GenerationRequest, QueueFullError, StreamChunk
from ignition.runtime.stats import EngineStats
from ignition.server.app import create_app


class ScriptedEngine:
    """Emits the words of ``reply`` one chunk at a time and records what it was asked."""

    model_name = "scripted"
    max_context_tokens = 64
    default_max_tokens = 16
    generation_defaults = GenerationDefaults()

    def __init__(self, reply: str = "one two three four", full: bool = False) -> None:
        self.reply = reply.split()
        self.full = full
        self.stats = EngineStats()
        self.requests: list[GenerationRequest] = []
        self.closed: list[str] = []
        self.gate = asyncio.Event()
        self.gate.set()

    def encode(self, text: str) -> list[int]:
        return [ord(c) % 50 + 1 for c in text]

    def render_chat(self, messages, **_: object) -> RenderedChat:
        text = "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"
        return RenderedChat(text, tuple(self.encode(text)), ())

    def is_healthy(self) -> bool:
        return True

    def generate(self, request: GenerationRequest):
        if self.full:
            raise QueueFullError("all 4 request slots are busy and the waiting queue is full")
        self.requests.append(request)
        return self._stream(request)

    async def _stream(self, request: GenerationRequest):
        n = len(request.prompt_ids)
        words = self.reply[: request.sampling.max_tokens]
        try:
            for i, word in enumerate(words):
                await self.gate.wait()
                last = i == len(words) - 1
                finish = ("length" if len(words) < len(self.reply) else "stop") if last else None
                yield StreamChunk(word + " ", (i,), n, i + 1, finish)
        finally:
            self.closed.append(request.request_id)


def client(engine: ScriptedEngine) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=create_app(engine))
    return httpx.AsyncClient(transport=transport, base_url="http://test")


def run(coro):
    return asyncio.run(coro)


def test_completion_returns_text_and_usage():
    engine = ScriptedEngine()

    async def go():
        async with client(engine) as c:
            return await c.post("/v1/completions", json={"prompt": "hello", "max_tokens": 8})

    r = run(go())
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "text_completion"
    assert body["model"] == "scripted"  # the served model when the request names none
    assert body["choices"][0]["text"] == "one two three four "
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}


def test_max_tokens_reaches_the_engine_and_length_is_reported():
    engine = ScriptedEngine()

    async def go():
        async with client(engine) as c:
            return await c.post("/v1/completions", json={"prompt": "hi", "max_tokens": 2})

    body = run(go()).json()
    assert engine.requests[0].sampling.max_tokens == 2
    assert body["choices"][0]["finish_reason"] == "length"


def test_sampling_fields_reach_the_engine():
    engine = ScriptedEngine()
    payload = {
        "prompt": [5, 6, 7],
        "temperature": 0.5,
        "top_p": 0.9,
        "top_k": 4,
        "seed": 11,
        "stop": ["x", "yz"],
    }

    async def go():
        async with client(engine) as c:
            return await c.post("/v1/completions", json=payload)

    assert run(go()).status_code == 200
    request = engine.requests[0]
    assert request.prompt_ids == (5, 6, 7)
    s = request.sampling
    assert (s.temperature, s.top_p, s.top_k, s.seed, s.stop) == (0.5, 0.9, 4, 11, ("x", "yz"))


def test_chat_goes_through_the_chat_template():
    engine = ScriptedEngine()
    payload = {"messages": [{"role": "user", "content": "hey"}], "max_completion_tokens": 3}

    async def go():
        async with client(engine) as c:
            return await c.post("/v1/chat/completions", json=payload)

    body = run(go()).json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "one two three "}
    assert engine.requests[0].prompt_ids == tuple(engine.encode("<user>hey<assistant>"))


def test_streaming_sends_sse_data_lines_ending_with_done():
    engine = ScriptedEngine()
    payload = {
        "messages": [{"role": "user", "content": "hey"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }

    async def go():
        async with client(engine) as c:
            return await c.post("/v1/chat/completions", json=payload)

    r = run(go())
    assert r.headers["content-type"].startswith("text/event-stream")
    lines = [line for line in r.text.split("\n") if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line[6:]) for line in lines[:-1]]
    assert events[0]["choices"][0]["delta"] == {"role": "assistant"}
    text = "".join(e["choices"][0]["delta"].get("content", "") for e in events if e["choices"])
    assert text == "one two three four "
    assert events[-1]["usage"]["completion_tokens"] == 4


@pytest.mark.parametrize(
    ("payload", "param"),
    [
        ({"prompt": "x", "max_tokens": 0}, "max_tokens"),
        ({"prompt": "x", "temperature": -1}, "temperature"),
        ({"prompt": "x", "top_p": 0}, "top_p"),
        ({"prompt": "x", "n": 2}, "n"),
        ({"prompt": ""}, "prompt"),
        ({"prompt": "x", "logprobs": 3}, "logprobs"),
        ({"prompt": "x", "bogus": 1}, "bogus"),
        ({}, "prompt"),
    ],
)
def test_bad_parameters_are_400_with_the_openai_error_body(payload, param):
    async def go():
        async with client(ScriptedEngine()) as c:
            return await c.post("/v1/completions", json=payload)

    r = run(go())
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert param in error["message"]


def test_prompt_longer_than_the_context_is_400():
    async def go():
        async with client(ScriptedEngine()) as c:
            return await c.post("/v1/completions", json={"prompt": "x" * 80})

    r = run(go())
    assert r.status_code == 400
    assert "context" in r.json()["error"]["message"]


def test_max_tokens_beyond_the_context_is_400():
    async def go():
        async with client(ScriptedEngine()) as c:
            return await c.post("/v1/completions", json={"prompt": "x" * 60, "max_tokens": 10})

    assert run(go()).status_code == 400


def test_full_queue_is_503():
    async def go():
        async with client(ScriptedEngine(full=True)) as c:
            return await c.post("/v1/completions", json={"prompt": "x"})

    r = run(go())
    assert r.status_code == 503
    assert "busy" in r.json()["error"]["message"]


def test_closing_a_stream_early_closes_the_engine_request():
    engine = ScriptedEngine()

    async def go():
        async with client(engine) as c:
            payload = {"prompt": "x", "stream": True}
            async with c.stream("POST", "/v1/completions", json=payload) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data: {"):
                        engine.gate.clear()
                        break
        await asyncio.sleep(0.05)

    run(go())
    assert engine.closed == [engine.requests[0].request_id]


def test_models_health_and_metrics():
    engine = ScriptedEngine()
    engine.stats.record_execution("decode", 1500)
    engine.stats.record_execution("speculative", 700, "acceptance_learning")
    engine.stats.record_speculation(num_offered=3, num_accepted=2)

    async def go():
        async with client(engine) as c:
            await c.post("/v1/completions", json={"prompt": "x"})
            return [await c.get(p) for p in ("/v1/models", "/health", "/metrics")]

    models, health, metrics = run(go())
    assert models.json()["data"][0]["id"] == "scripted"
    assert health.json() == {"status": "ok"}
    text = metrics.text
    assert 'flare_scheduler_executions_total{class="ordinary",kind="decode"} 1.0' in text
    assert (
        'flare_scheduler_execution_nanoseconds_total{class="ordinary",kind="decode"} 1500.0' in text
    )
    assert (
        'flare_scheduler_execution_nanoseconds_total{class="acceptance_learning",'
        'kind="speculative"} 700.0' in text
    )
    for cls in ("ordinary", "discovery", "timing_refresh", "acceptance_learning"):
        assert f'flare_scheduler_executions_total{{class="{cls}",kind="decode"}}' in text
    assert "flare_speculative_draft_tokens_total 3.0" in text
    assert 'flare_speculative_accepted_tokens_per_position_total{position="2"} 1.0' in text
    assert "flare_time_to_first_token_seconds_count 1.0" in text


class FailingEngine(ScriptedEngine):
    """The frame serving this request fails after two chunks."""

    async def _stream(self, request: GenerationRequest):
        yield StreamChunk("one ", (1,), 1, 1)
        yield StreamChunk("", (), 1, 1, "error", "decode-b1 failed: RuntimeError: boom")


def test_a_failed_request_is_a_500_with_the_reason():
    async def go():
        async with client(FailingEngine()) as c:
            return await c.post("/v1/completions", json={"prompt": "x"})

    r = run(go())
    assert r.status_code == 500
    assert r.json()["error"]["type"] == "server_error"
    assert "boom" in r.json()["error"]["message"]


def test_a_failed_stream_ends_with_an_error_event_and_done():
    async def go():
        async with client(FailingEngine()) as c:
            return await c.post("/v1/completions", json={"prompt": "x", "stream": True})

    lines = [line for line in run(go()).text.split("\n") if line]
    assert lines[-1] == "data: [DONE]"
    assert "boom" in json.loads(lines[-2][6:])["error"]["message"]
