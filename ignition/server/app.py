"""The OpenAI-compatible HTTP API over an engine.

The app knows nothing about graphs or scheduling: it validates, tokenizes,
hands a :class:`GenerationRequest` to the engine and relays the engine's
published chunks, as one JSON body or as SSE ``data:`` lines ending in
``data: [DONE]``. A client that disconnects closes the stream generator, which
cancels the request in the engine; the engine frees the slot after its last
submitted fence. Every failure maps to OpenAI's error body; nothing a client
sends produces a 500.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse

from ignition.runtime.chat_template import ChatTemplateError, RenderedChat
from ignition.runtime.generation_config import GenerationDefaults
from ignition.runtime.requests import (
    GenerationRequest,
    QueueFullError,
    RequestError,
    SamplingParams,
    StreamChunk,
)
from ignition.runtime.stats import EngineStats
from ignition.server.metrics import ServerMetrics
from ignition.server.protocol import (
    ChatCompletionRequest,
    CompletionRequest,
    error_body,
    new_id,
    now_s,
    usage,
)


class EngineClient(Protocol):
    """What the HTTP layer needs from an engine (the runtime's AsyncEngine provides it)."""

    model_name: str
    max_context_tokens: int
    default_max_tokens: int
    stats: EngineStats
    generation_defaults: GenerationDefaults

    def encode(self, text: str) -> list[int]: ...

    def render_chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> RenderedChat:
        """The prompt ids and per-message end offsets; raises ChatTemplateError (a 400)."""
        ...

    def generate(self, request: GenerationRequest) -> AsyncIterator[StreamChunk]:
        """Admit now (raising QueueFullError or RequestError) and stream published chunks;
        closing the iterator early cancels the request."""
        ...

    def is_healthy(self) -> bool: ...


def _error(status: int, message: str, kind: str, param: str | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content=error_body(message, kind, param))


def _validation_message(err: RequestValidationError) -> tuple[str, str | None]:
    first = err.errors()[0] if err.errors() else {}
    location = [str(p) for p in first.get("loc", ()) if p != "body"]
    param = ".".join(location) or None
    message = str(first.get("msg", "invalid request")).removeprefix("Value error, ")
    return (f"{param}: {message}" if param else message), param


def create_app(engine: EngineClient) -> FastAPI:
    app = FastAPI(title="Ignition", version="0.1.0")
    metrics = ServerMetrics(engine.stats)
    app.state.engine = engine
    app.state.metrics = metrics

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, err: RequestValidationError) -> JSONResponse:
        message, param = _validation_message(err)
        return _error(400, message, "invalid_request_error", param)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, err: Exception) -> JSONResponse:
        return _error(500, f"internal error: {type(err).__name__}: {err}", "server_error")

    @app.get("/health")
    async def health() -> Response:
        if engine.is_healthy():
            return JSONResponse({"status": "ok"})
        return _error(503, "the engine loop is not running", "server_error")

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {
                    "id": engine.model_name,
                    "object": "model",
                    "created": now_s(),
                    "owned_by": "ignition",
                    "max_model_len": engine.max_context_tokens,
                }
            ],
        }

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type="text/plain; version=0.0.4")

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest, raw: Request) -> Response:
        if isinstance(body.prompt, str):
            prompt_ids = engine.encode(body.prompt)
        else:
            prompt_ids = list(body.prompt)
        return await _serve(raw, body, prompt_ids, chat=False)

    @app.post("/v1/chat/completions")
    async def chat(body: ChatCompletionRequest, raw: Request) -> Response:
        try:
            rendered = engine.render_chat(
                body.template_messages(),
                tools=body.template_tools(),
                add_generation_prompt=body.add_generation_prompt,
                template_kwargs=body.chat_template_kwargs,
            )
        except ChatTemplateError as err:
            metrics.http_requests.labels("chat", "400").inc()
            return _error(400, str(err), "invalid_request_error", "messages")
        return await _serve(raw, body, list(rendered.prompt_ids), chat=True)

    async def _serve(
        raw: Request,
        body: CompletionRequest | ChatCompletionRequest,
        prompt_ids: list[int],
        chat: bool,
    ) -> Response:
        endpoint = "chat" if chat else "completions"
        try:
            request = _build_request(body, prompt_ids, chat)
        except RequestError as err:
            metrics.http_requests.labels(endpoint, "400").inc()
            return _error(400, str(err), "invalid_request_error", "prompt")
        try:
            stream = engine.generate(request)
        except QueueFullError as err:
            metrics.http_requests.labels(endpoint, "503").inc()
            return _error(503, str(err), "server_overloaded")
        except RequestError as err:
            metrics.http_requests.labels(endpoint, "400").inc()
            return _error(400, str(err), "invalid_request_error")
        metrics.http_requests.labels(endpoint, "200").inc()
        relay = _Relay(metrics, time.monotonic())
        if body.stream:
            return StreamingResponse(
                _sse(
                    request,
                    stream,
                    relay,
                    chat,
                    body.include_usage,
                    body.model or engine.model_name,
                ),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        result = await _collect_or_cancel(
            raw, _collect(request, stream, relay, chat, body.model or engine.model_name)
        )
        if result is None:
            return Response(status_code=499)
        return JSONResponse(result, status_code=500 if "error" in result else 200)

    def _build_request(
        body: CompletionRequest | ChatCompletionRequest, prompt_ids: list[int], chat: bool
    ) -> GenerationRequest:
        room = engine.max_context_tokens - len(prompt_ids)
        if room < 1:
            raise RequestError(
                f"the prompt has {len(prompt_ids)} tokens; this model's context is "
                f"{engine.max_context_tokens} tokens, which leaves no room for output"
            )
        sampling: SamplingParams = engine.generation_defaults.apply(
            body.sampling(min(engine.default_max_tokens, room)), _given(body)
        )
        if sampling.max_tokens > room:
            raise RequestError(
                f"max_tokens = {sampling.max_tokens} with a {len(prompt_ids)}-token prompt "
                f"exceeds the context of {engine.max_context_tokens} tokens"
            )
        return GenerationRequest(
            request_id=new_id("chatcmpl" if chat else "cmpl"),
            prompt_ids=tuple(prompt_ids),
            sampling=sampling,
        )

    return app


def _given(body: CompletionRequest | ChatCompletionRequest) -> set[str]:
    """Sampling fields the client set; the others take the checkpoint's generation defaults."""
    return {name for name in body.model_fields_set if getattr(body, name) is not None}


class _Relay:
    """Observes publication latency as chunks reach the client."""

    def __init__(self, metrics: ServerMetrics, arrival: float) -> None:
        self._metrics = metrics
        self._last: float | None = None
        self._arrival = arrival

    def saw(self, chunk: StreamChunk) -> None:
        if not chunk.text and not chunk.token_ids:
            return
        now = time.monotonic()
        if self._last is None:
            self._metrics.time_to_first_token.observe(now - self._arrival)
        else:
            self._metrics.inter_token.observe(now - self._last)
        self._last = now


async def _chunks(rest: AsyncIterator[StreamChunk], relay: _Relay):
    """Relay the engine's chunks; closing this generator (a disconnect) cancels the request."""
    try:
        async for chunk in rest:
            relay.saw(chunk)
            yield chunk
    finally:
        await rest.aclose()  # type: ignore[attr-defined]


async def _until_disconnected(raw: Request, poll_s: float = 0.05) -> None:
    while not await raw.is_disconnected():
        await asyncio.sleep(poll_s)


async def _collect_or_cancel(raw: Request, work) -> dict[str, Any] | None:
    """Run a non-streaming collection, abandoning it (and the request) if the client leaves."""
    collect = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_until_disconnected(raw))
    try:
        done, _ = await asyncio.wait({collect, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
    if collect in done:
        return collect.result()
    collect.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await collect
    return None


def _choice(chat: bool, text: str, finish: str | None, delta: bool) -> dict[str, Any]:
    if not chat:
        return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
    key = "delta" if delta else "message"
    content: dict[str, Any] = {"role": "assistant", "content": text} if not delta else {}
    if delta and text:
        content["content"] = text
    return {"index": 0, key: content, "logprobs": None, "finish_reason": finish}


async def _collect(request, rest, relay, chat: bool, model: str | None) -> dict[str, Any]:
    text, finish, last = "", None, None
    async for chunk in _chunks(rest, relay):
        text += chunk.text
        finish = chunk.finish_reason or finish
        last = chunk
    if last is not None and last.error:
        return error_body(last.error, "server_error")
    num_prompt = last.num_prompt_tokens if last else len(request.prompt_ids)
    num_output = last.num_output_tokens if last else 0
    return {
        "id": request.request_id,
        "object": "chat.completion" if chat else "text_completion",
        "created": now_s(),
        "model": model or "ignition",
        "choices": [_choice(chat, text, finish or "stop", delta=False)],
        "usage": usage(num_prompt, num_output),
    }


async def _sse(request, rest, relay, chat: bool, include_usage: bool, model):
    base = {
        "id": request.request_id,
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": now_s(),
        "model": model or "ignition",
    }
    if chat:
        opening = {
            **base,
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant"},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ],
        }
        yield f"data: {json.dumps(opening)}\n\n"
    last = None
    async for chunk in _chunks(rest, relay):
        last = chunk
        if chunk.error:
            yield f"data: {json.dumps(error_body(chunk.error, 'server_error'))}\n\n"
            break
        if not chunk.text and chunk.finish_reason is None:
            continue
        payload = {**base, "choices": [_choice(chat, chunk.text, chunk.finish_reason, True)]}
        yield f"data: {json.dumps(payload)}\n\n"
    if include_usage:
        num_prompt = last.num_prompt_tokens if last else len(request.prompt_ids)
        num_output = last.num_output_tokens if last else 0
        final = {**base, "choices": [], "usage": usage(num_prompt, num_output)}
        yield f"data: {json.dumps(final)}\n\n"
    yield "data: [DONE]\n\n"
