"""An asyncio face for the engine: a background loop thread plus per-request queues."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from ignition.runtime.chat.template import ChatRenderer, RenderedChat
from ignition.runtime.chat.template_files import ChatTemplates
from ignition.runtime.grammar import GrammarError, GrammarSpec, RequestGrammar
from ignition.runtime.loop.engine import Engine
from ignition.runtime.loop.stats import EngineStats
from ignition.runtime.requests.errors import EngineStoppedError
from ignition.runtime.requests.generation_config import GenerationDefaults
from ignition.runtime.requests.request import GenerationRequest, StreamChunk

log = logging.getLogger("ignition.engine")


class AsyncEngine:
    """Owns the engine thread; implements the server's EngineClient protocol."""

    def __init__(
        self,
        engine: Engine,
        *,
        model_name: str,
        encode: Callable[[str], list[int]],
        chat: ChatRenderer | None = None,
        generation_defaults: GenerationDefaults | None = None,
        default_max_tokens: int = 256,
        idle_poll_s: float = 0.05,
        decode: Callable[..., str] | None = None,
        on_fatal: Callable[[str], None] | None = None,
        encode_plain: Callable[[str], list[int]] | None = None,
    ) -> None:
        """``encode_plain``: ``encode`` without the tokenizer's special tokens."""
        self.engine = engine
        self.model_name = model_name
        self.max_context_tokens = engine.max_context_tokens
        self.default_max_tokens = default_max_tokens
        self.vocab_size: int | None = engine.vocab_size
        self.stats: EngineStats = engine.stats
        self.generation_defaults = generation_defaults or GenerationDefaults()
        self._encode = encode
        self._encode_plain = encode_plain or encode
        self._decode = decode or engine.decoder.decode
        self.on_fatal = on_fatal
        self._chat = chat or ChatRenderer(
            ChatTemplates.fallback(), lambda texts: [encode(t) for t in texts]
        )
        self._idle_poll_s = idle_poll_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failure: str | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="ignition-engine", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                if not self.engine.step():
                    self.engine.wait_for_work(self._idle_poll_s)
        except Exception as err:  # the loop cannot continue: end every request cleanly
            message = f"the engine loop stopped: {type(err).__name__}: {err}"
            log.critical(message)  # one line; the traceback is for whoever debugs it
            log.debug("the engine loop stopped here", exc_info=err)
            self.failure = message
            try:
                self.engine.fail_all(message)
            finally:
                if self.on_fatal is not None:
                    self.on_fatal(message)

    def is_healthy(self) -> bool:
        return self.failure is None and self._thread is not None and self._thread.is_alive()

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """``add_special_tokens`` False: without the tokenizer's own special tokens."""
        return self._encode(text) if add_special_tokens else self._encode_plain(text)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return self._decode(list(ids), skip_special_tokens=skip_special_tokens)

    def render_chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> RenderedChat:
        """Render and tokenize a conversation (raises ChatTemplateError, a 400)."""
        return self._chat.render(
            messages,
            tools=tools,
            add_generation_prompt=add_generation_prompt,
            template_kwargs=template_kwargs,
        )

    def compile_grammar(self, spec: GrammarSpec) -> RequestGrammar:
        """A structured-output grammar for ``spec``; GrammarError names the field."""
        compiler = self.engine.grammar
        if compiler is None:
            raise GrammarError(
                f"{spec.field}: this server has no structured outputs (xgrammar is not "
                "installed or cannot read this model's tokenizer)",
                spec.field,
            )
        return compiler.compile(spec)

    def generate(self, request: GenerationRequest) -> AsyncIterator[StreamChunk]:
        if self.failure is not None:
            raise EngineStoppedError(self.failure)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[StreamChunk] = asyncio.Queue()

        def sink(chunk: StreamChunk) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, chunk)

        self.engine.submit(request, sink)  # raises QueueFullError / RequestError now
        return _RequestStream(self, request, queue)

    async def __aenter__(self) -> AsyncEngine:
        self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.stop()


class _RequestStream:
    """One request's chunks; closing it before the final chunk cancels the request."""

    def __init__(
        self, owner: AsyncEngine, request: GenerationRequest, queue: asyncio.Queue[StreamChunk]
    ) -> None:
        self._owner = owner
        self._request = request
        self._queue = queue
        self._finished = False
        self._closed = False

    def __aiter__(self) -> _RequestStream:
        return self

    async def __anext__(self) -> StreamChunk:
        if self._finished or self._closed:
            raise StopAsyncIteration
        while True:
            try:
                chunk = await asyncio.wait_for(self._queue.get(), timeout=1.0)
            except TimeoutError:
                if self._owner.failure is not None and self._queue.empty():
                    chunk = StreamChunk(
                        "", (), len(self._request.prompt_ids), 0, "error", self._owner.failure
                    )
                else:
                    continue
            self._finished = chunk.finish_reason is not None
            return chunk

    async def aclose(self) -> None:
        if not (self._finished or self._closed):
            self._owner.engine.cancel(self._request.request_id)
        self._closed = True
