"""How long /health waits while a big prompt is tokenized; how fast a huge body is refused.

Run: python benchmarks/server_big_prompt.py
The app runs in-process (httpx's ASGI transport) with the embedded checkpoint's
tokenizer and a stand-in engine that returns one token. It prints, for prompts
of growing size, the time the completion took (tokenization dominates) and the
longest /health stall while it ran: probes go every 10 ms, and a blocked event
loop shows up as a late probe. Tokenization runs on a worker thread through an
encoder that releases the GIL (serving/app.py says why). Then it posts a 10 MB body
against the default --max-request-bytes and prints how long the 413 took.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
from tokenizers import Tokenizer

from ignition.runtime.chat.template import RenderedChat
from ignition.runtime.loop.stats import EngineStats
from ignition.runtime.requests.generation_config import GenerationDefaults
from ignition.runtime.requests.request import GenerationRequest, StreamChunk
from ignition.server.app import create_app
from ignition.serving.app import gil_releasing_encoder

ASSET = Path(__file__).resolve().parent.parent / "ignition" / "assets" / "qwen38-tiny"
LINE = "def handler(request):\n    return request.args\n"


class OneTokenEngine:
    model_name = "bench"
    max_context_tokens = 1 << 30
    default_max_tokens = 1
    vocab_size = None
    generation_defaults = GenerationDefaults()

    def __init__(self) -> None:
        self.stats = EngineStats()
        self.tokenizer = Tokenizer.from_file(str(ASSET / "tokenizer.json"))
        self.encode = gil_releasing_encoder(self.tokenizer)  # as `ignition serve` does

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode(list(ids))

    def render_chat(self, messages, **_) -> RenderedChat:
        text = "".join(m["content"] for m in messages)
        return RenderedChat(text, tuple(self.encode(text)), ())

    def is_healthy(self) -> bool:
        return True

    def generate(self, request: GenerationRequest):
        async def stream():
            yield StreamChunk("x", (1,), len(request.prompt_ids), 1, "length")

        return stream()


async def probe(client: httpx.AsyncClient, size_bytes: int) -> tuple[float, float]:
    prompt = LINE * (size_bytes // len(LINE))
    began = time.perf_counter()
    work = asyncio.ensure_future(
        client.post("/v1/completions", json={"prompt": prompt, "max_tokens": 1}, timeout=600)
    )
    # A probe round is one /health call plus a 10 ms sleep; anything beyond that is time
    # the event loop could not serve (a blocked loop delays the sleep's wake-up too).
    worst, last = 0.0, time.perf_counter()
    while not work.done():
        await client.get("/health")
        await asyncio.sleep(0.01)
        now = time.perf_counter()
        worst, last = max(worst, now - last - 0.01), now
    response = await work
    assert response.status_code == 200, response.text
    return time.perf_counter() - began, worst


async def main() -> None:
    app = create_app(OneTokenEngine())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        for size in (100_000, 1_000_000, 2_000_000, 3_500_000):
            total, worst = await probe(client, size)
            health_ms = worst * 1e3
            print(f"prompt {size / 1e6:.1f} MB: completion {total:.2f} s, ", end="")
            print(f"longest /health stall {health_ms:.1f} ms")
        body = json.dumps({"prompt": "x" * 10_000_000}).encode()
        began = time.perf_counter()
        r = await client.post(
            "/v1/completions", content=body, headers={"content-type": "application/json"}
        )
        print(f"10 MB body: {r.status_code} in {(time.perf_counter() - began) * 1e3:.1f} ms")


if __name__ == "__main__":
    asyncio.run(main())
