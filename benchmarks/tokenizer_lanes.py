"""A 4-token request beside large prompts: its latency with the tokenizer lanes and without.

Issue 24, defect 3: eight concurrent 2 MB prompts held every thread of the executor the
server tokenized on, and a 4-token request sent beside them took 22 s. This sends
``--count`` large completions prompts at once through the in-process app (the embedded
checkpoint's tokenizer, through the GIL-releasing encoder `ignition serve` uses, and a
stand-in engine that returns one token), then the small request, and prints how long the
small one took and how long the large ones took, once with the lanes
(server/tokenizing.py) and once with the former single executor (asyncio.to_thread) as
the peer, and the ratio.

    python benchmarks/tokenizer_lanes.py [--count 8] [--large-bytes 2000000]

The large prompts are over the context of no engine here (its context is unbounded), so
all of them are tokenized: the worst case for the lanes.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from unittest import mock

import httpx
from tokenizers import Tokenizer

from ignition.runtime.loop.stats import EngineStats
from ignition.runtime.requests.generation_config import GenerationDefaults
from ignition.runtime.requests.request import GenerationRequest, StreamChunk
from ignition.server.app import create_app
from ignition.server.config import ServerConfig
from ignition.server.tokenizing import TokenizerLanes
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
        self.encode = gil_releasing_encoder(self.tokenizer)

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode(list(ids))

    def is_healthy(self) -> bool:
        return True

    def generate(self, request: GenerationRequest):
        async def stream():
            yield StreamChunk("x", (1,), len(request.prompt_ids), 1, "length")

        return stream()


async def one_run(count: int, large_bytes: int) -> tuple[float, float]:
    """(seconds the small request took, seconds until the last large one finished)."""
    config = ServerConfig(max_request_bytes=2 * large_bytes + 1024)  # JSON doubles each newline
    transport = httpx.ASGITransport(app=create_app(OneTokenEngine(), config))
    large = LINE * (large_bytes // len(LINE))
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        began = time.perf_counter()
        bodies = [{"prompt": large + str(i), "max_tokens": 1} for i in range(count)]
        work = [
            asyncio.ensure_future(client.post("/v1/completions", json=b, timeout=600))
            for b in bodies
        ]
        await asyncio.sleep(0.2)  # the large ones are parsed and tokenizing
        small_began = time.perf_counter()
        small = await client.post("/v1/completions", json={"prompt": "import os", "max_tokens": 1})
        small_s = time.perf_counter() - small_began
        assert small.status_code == 200, small.text
        statuses = [r.status_code for r in await asyncio.gather(*work)]
        assert all(s in (200, 503) for s in statuses), statuses
        return small_s, time.perf_counter() - began


async def to_thread_only(self, cost, work):
    """The peer: every tokenization on the default executor, as before the lanes."""
    return await asyncio.to_thread(work)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=8)
    parser.add_argument("--large-bytes", type=int, default=2_000_000)
    args = parser.parse_args()
    print(f"{args.count} prompts of {args.large_bytes} bytes, then one 4-token request")
    lanes_small, lanes_all = asyncio.run(one_run(args.count, args.large_bytes))
    with mock.patch.object(TokenizerLanes, "run", to_thread_only):
        single_small, single_all = asyncio.run(one_run(args.count, args.large_bytes))
    print(f"  single executor: small request {single_small:8.3f} s, all done {single_all:7.2f} s")
    print(f"  tokenizer lanes: small request {lanes_small:8.3f} s, all done {lanes_all:7.2f} s")
    print(f"  small-request latency ratio (single / lanes): {single_small / lanes_small:.1f}x")


if __name__ == "__main__":
    main()
