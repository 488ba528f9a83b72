"""A scripted engine for HTTP tests: the API contract without a model."""

from __future__ import annotations

import asyncio

import httpx

from ignition.runtime.chat.template import RenderedChat
from ignition.runtime.grammar import GrammarError, GrammarSpec, RequestGrammar
from ignition.runtime.loop.stats import EngineStats
from ignition.runtime.requests.errors import QueueFullError
from ignition.runtime.requests.generation_config import GenerationDefaults
from ignition.runtime.requests.request import GenerationRequest, StreamChunk
from ignition.server.app import create_app
from ignition.server.config import ServerConfig
from ignition.server.images import VisionServing


class ScriptedEngine:
    """Emits the words of ``reply`` one chunk at a time and records what it was asked.

    ``pieces``: emit exactly these texts, one chunk each, instead (tool calls and
    reasoning need exact text). ``opening``: what the chat "template" writes after the
    assistant turn starts (for example ``<think>\n``). ``rendered`` holds each rendered
    chat prompt. ``vision``: how the app built over it serves image parts (none: text only)."""

    model_name = "scripted"
    max_context_tokens = 64
    default_max_tokens = 16
    vocab_size = 64
    generation_defaults = GenerationDefaults()
    vision: VisionServing | None = None

    def __init__(
        self,
        reply: str = "one two three four",
        full: bool = False,
        pieces: list[str] | None = None,
        opening: str = "",
    ) -> None:
        self.reply = list(pieces) if pieces is not None else [w + " " for w in reply.split()]
        self.opening = opening
        self.rendered: list[str] = []
        self.full = full
        self.stats = EngineStats()
        self.requests: list[GenerationRequest] = []
        self.closed: list[str] = []
        self.encoded: list[str] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.cached = 0  # prompt tokens each stream reports as restored from a checkpoint

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """A toy tokenizer without special tokens (``add_special_tokens`` changes nothing)."""
        self.encoded.append(text)
        return [ord(c) % 50 + 1 for c in text]

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "".join(chr(96 + i % 27) for i in ids)

    def render_chat(self, messages, **_: object) -> RenderedChat:
        text = "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"
        text += self.opening
        self.rendered.append(text)
        return RenderedChat(text, tuple(self.encode(text)), ())

    def compile_grammar(self, spec: GrammarSpec) -> RequestGrammar:
        raise GrammarError(f"{spec.field}: this server has no structured outputs", spec.field)

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
                yield StreamChunk(word, (i,), n, i + 1, finish, num_cached_tokens=self.cached)
        finally:
            self.closed.append(request.request_id)


def client(engine: ScriptedEngine, config: ServerConfig | None = None) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=create_app(engine, config, vision=engine.vision))
    return httpx.AsyncClient(transport=transport, base_url="http://test")


def run(coro):
    return asyncio.run(coro)
