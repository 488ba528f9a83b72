"""An asyncio face for the engine: a background loop thread plus per-request queues.

The HTTP server runs on an event loop; the engine runs on its own thread so
that a long graph execution never blocks request handling. Chunks cross over
through ``loop.call_soon_threadsafe`` into one ``asyncio.Queue`` per request.
Closing a request's async iterator before its final chunk cancels it in the
engine, which is how a client disconnect becomes a cancellation.
"""

from __future__ import annotations

import asyncio
import threading
import traceback
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from ignition.runtime.chat_template import ChatRenderer, RenderedChat
from ignition.runtime.chat_template_files import ChatTemplates
from ignition.runtime.engine import Engine
from ignition.runtime.generation_config import GenerationDefaults
from ignition.runtime.requests import GenerationRequest, StreamChunk
from ignition.runtime.stats import EngineStats


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
    ) -> None:
        self.engine = engine
        self.model_name = model_name
        self.max_context_tokens = engine.max_context_tokens
        self.default_max_tokens = default_max_tokens
        self.stats: EngineStats = engine.stats
        self.generation_defaults = generation_defaults or GenerationDefaults()
        self._encode = encode
        self._chat = chat or ChatRenderer(
            ChatTemplates.fallback(), lambda texts: [encode(t) for t in texts]
        )
        self._idle_poll_s = idle_poll_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failure: str | None = None

    # -- lifecycle -----------------------------------------------------------------

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
        except BaseException:  # the loop died: report unhealthy rather than hang clients
            self.failure = traceback.format_exc()
            raise

    def is_healthy(self) -> bool:
        return self.failure is None and self._thread is not None and self._thread.is_alive()

    # -- EngineClient --------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        return self._encode(text)

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

    def generate(self, request: GenerationRequest) -> AsyncIterator[StreamChunk]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[StreamChunk] = asyncio.Queue()

        def sink(chunk: StreamChunk) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, chunk)

        self.engine.submit(request, sink)  # raises QueueFullError / RequestError now
        return self._stream(request.request_id, queue)

    async def _stream(self, request_id: str, queue: asyncio.Queue[StreamChunk]):
        finished = False
        try:
            while True:
                if self.failure is not None:
                    raise RuntimeError("the engine loop stopped; see the server log")
                try:
                    chunk = await asyncio.wait_for(queue.get(), timeout=1.0)
                except TimeoutError:
                    continue
                finished = chunk.finish_reason is not None
                yield chunk
                if finished:
                    return
        finally:
            if not finished:
                self.engine.cancel(request_id)

    async def __aenter__(self) -> AsyncEngine:
        self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.stop()
