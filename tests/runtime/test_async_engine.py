"""The asyncio bridge: engine thread, per-request queues, cancellation on close."""

from __future__ import annotations

import asyncio

import httpx

from ignition.runtime.async_engine import AsyncEngine
from ignition.runtime.chat.template import ChatRenderer
from ignition.runtime.chat.template_files import ChatTemplates
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from ignition.server.app import create_app
from tests.runtime.scripted import Letters, expected_tokens, make_engine

TEMPLATE = "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}[assistant]"


def async_engine(num_slots: int = 4) -> tuple[AsyncEngine, object]:
    engine, worker = make_engine(num_slots=num_slots)
    chat = ChatRenderer(
        ChatTemplates({"default": TEMPLATE}, "test"),
        lambda texts: [[ord(c) % 26 for c in text] for text in texts],
    )
    return (
        AsyncEngine(
            engine,
            model_name="scripted",
            encode=lambda text: [ord(c) % 26 for c in text],
            chat=chat,
        ),
        worker,
    )


def test_generate_streams_until_the_final_chunk():
    bridge, _ = async_engine()

    async def go():
        async with bridge:
            request = GenerationRequest(
                "a", (1, 2, 3), SamplingParams(max_tokens=5, ignore_eos=True)
            )
            return [chunk async for chunk in bridge.generate(request)]

    chunks = asyncio.run(go())
    assert chunks[-1].finish_reason == "length"
    expected = expected_tokens([1, 2, 3], 5, stop_at_eos=False)
    assert "".join(c.text for c in chunks) == Letters().decode(expected)


def test_closing_the_stream_cancels_the_request_and_frees_its_slot():
    bridge, worker = async_engine(num_slots=1)

    async def go():
        async with bridge:
            long = GenerationRequest(
                "long", (1, 2), SamplingParams(max_tokens=10_000, ignore_eos=True)
            )
            stream = bridge.generate(long)
            await anext(stream)
            await stream.aclose()
            short = GenerationRequest("short", (4,), SamplingParams(max_tokens=2, ignore_eos=True))
            return [c async for c in bridge.generate(short)]

    chunks = asyncio.run(asyncio.wait_for(go(), timeout=60))
    assert chunks[-1].finish_reason == "length"
    assert len(worker.released) == 2


def test_chat_prompt_renders_the_checkpoint_template():
    bridge, _ = async_engine()
    rendered = bridge.render_chat([{"role": "user", "content": "hi"}])
    assert rendered.text == "[user]hi[assistant]"
    assert rendered.prompt_ids == tuple(ord(c) % 26 for c in "[user]hi[assistant]")


def test_http_round_trip_through_the_engine_thread():
    bridge, _ = async_engine()

    async def go():
        async with bridge:
            transport = httpx.ASGITransport(app=create_app(bridge))
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                done = await client.post(
                    "/v1/completions", json={"prompt": "abc", "max_tokens": 4, "ignore_eos": True}
                )
                health = await client.get("/health")
                return done, health

    done, health = asyncio.run(asyncio.wait_for(go(), timeout=60))
    assert done.status_code == 200
    assert done.json()["usage"]["completion_tokens"] == 4
    assert health.status_code == 200
