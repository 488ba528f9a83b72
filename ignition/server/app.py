"""The OpenAI-compatible HTTP API over an engine: validate, tokenize, hand one
:class:`GenerationRequest` per choice to the engine, relay its published chunks. Nothing a
client sends produces a 500 (docs/server.md, "The app").
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response, StreamingResponse

from ignition import __version__
from ignition.runtime.chat.template import ChatTemplateError, RenderedChat
from ignition.runtime.requests.errors import EngineStoppedError, QueueFullError, RequestError
from ignition.runtime.tracing.recorder import TraceRecorder
from ignition.runtime.vision.inputs import RequestImages
from ignition.server.body import new_id, now_s
from ignition.server.chat_protocol import (
    ChatCompletionRequest,
    TokenizeChatRequest,
    TokenizeRequest,
)
from ignition.server.config import ServerConfig
from ignition.server.dashboard import install_dashboard
from ignition.server.door import Door
from ignition.server.engine_client import EngineClient
from ignition.server.engine_requests import build_requests, request_grammar
from ignition.server.errors import (
    ApiError,
    install_error_handlers,
    json_response,
    openai_openapi,
    overloaded,
)
from ignition.server.images import VisionServing, expand_chat_prompt, load_chat_images
from ignition.server.metrics import ServerMetrics
from ignition.server.middleware import ApiKey, BodyLimit, CountResponses, LastResort
from ignition.server.protocol import CompletionRequest, DetokenizeRequest
from ignition.server.responses import (
    ERRORS,
    ChatCompletionResponse,
    CompletionResponse,
    DetokenizeResponse,
    HealthResponse,
    ModelCard,
    ModelList,
    TokenizeResponse,
    VersionResponse,
    generation_responses,
)
from ignition.server.streams import Choice, Relay, close_all, collect, collect_or_cancel, sse
from ignition.server.tokenizing import LaneFull, TokenizerLanes
from ignition.server.tools.choice import ReplyPlan, plan_reply
from ignition.server.tools.output import ReplyParser


def create_app(
    engine: EngineClient,
    config: ServerConfig | None = None,
    trace: TraceRecorder | None = None,
    *,
    vision: VisionServing | None = None,
) -> FastAPI:
    """``trace``: the engine's trace recorder, which /dashboard reads (none: no page);
    ``vision``: how image parts are served (none: text content only)."""
    config = config or ServerConfig()
    names = config.served_model_names or (engine.model_name,)
    app = FastAPI(title="Ignition", version=__version__)
    metrics = ServerMetrics(engine.stats, names[0], vllm_aliases=config.vllm_metrics)
    app.state.engine = engine
    app.state.metrics = metrics
    install_error_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=config.max_request_bytes)
    if config.api_key:
        app.add_middleware(ApiKey, api_key=config.api_key)
    app.add_middleware(LastResort)
    app.add_middleware(CountResponses, count=metrics.count)  # outermost: sees every status
    app.openapi = lambda: openai_openapi(app, names, engine.vocab_size)  # type: ignore[method-assign]
    lanes = TokenizerLanes(max_queued_chars=config.max_queued_tokenizer_chars)
    app.state.tokenizer_lanes = lanes
    door = Door(engine, config, names)
    if config.dashboard and trace is not None:
        install_dashboard(app, trace)

    async def tokenizing(cost: int, work):
        """Tokenizer work on its lane (server/tokenizing.py); a full lane is a 503."""
        try:
            return await lanes.run(cost, work)
        except LaneFull as err:
            raise overloaded(str(err)) from None

    unavailable = {503: ERRORS[503]}

    @functools.lru_cache(maxsize=1 << 16)
    def token_text(token: int) -> str:
        """One token's text as logprobs show it (special tokens included); cached, since
        every position decodes up to 21 tokens on the event loop."""
        return engine.decode([token], skip_special_tokens=False)

    @app.get("/health", response_model=HealthResponse, responses=unavailable)
    async def health() -> Response:
        if engine.is_healthy():
            return json_response(200, {"status": "ok"})
        raise overloaded("the engine loop is not running")

    @app.get("/ping", response_model=HealthResponse, responses=unavailable)
    async def ping() -> Response:
        return await health()

    @app.get("/version", response_model=VersionResponse)
    async def version() -> dict[str, str]:
        return {"version": __version__}

    def card(name: str) -> dict[str, Any]:
        return {
            "id": name,
            "object": "model",
            "created": now_s(),
            "owned_by": "ignition",
            "root": engine.model_name,
            "max_model_len": engine.max_context_tokens,
        }

    @app.get("/v1/models", response_model=ModelList, responses={401: ERRORS[401]})
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [card(name) for name in names]}

    @app.get(
        "/v1/models/{model_id:path}",
        response_model=ModelCard,
        responses={401: ERRORS[401], 404: ERRORS[404]},
    )
    async def model(model_id: str) -> dict[str, Any]:
        return card(door.model(model_id))

    @app.get(
        "/metrics",
        response_class=PlainTextResponse,
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
    )
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type="text/plain; version=0.0.4")

    @app.post("/tokenize", response_model=TokenizeResponse, responses=ERRORS)
    async def tokenize(body: TokenizeRequest) -> dict[str, Any]:
        door.model(body.model)
        if isinstance(body, TokenizeChatRequest):
            door.tools_rendered(body.template_tools())
            prepared = await asyncio.to_thread(load_chat_images, body, vision)
            placeholder = vision.placeholder if prepared and vision else ""
            messages = [m.for_template(placeholder) for m in body.messages]
            rendered = await render(
                chat_cost(body.messages, body.tools),
                lambda: engine.render_chat(
                    messages,
                    tools=body.template_tools(),
                    add_generation_prompt=body.add_generation_prompt,
                    template_kwargs=body.chat_template_kwargs,
                ),
            )
            ids = list(rendered.prompt_ids)
            if body.add_special_tokens:  # the tokenizer's specials around the rendered text
                ids = await tokenizing(len(rendered.text), lambda: engine.encode(rendered.text))
            if prepared and vision is not None:  # one token per image feature, as served
                ids = expand_chat_prompt(ids, (), prepared, vision)[0]
        else:
            plain = {} if body.add_special_tokens else {"add_special_tokens": False}
            ids = await tokenizing(len(body.prompt), lambda: engine.encode(body.prompt, **plain))
        return {"count": len(ids), "max_model_len": engine.max_context_tokens, "tokens": ids}

    @app.post("/detokenize", response_model=DetokenizeResponse, responses=ERRORS)
    async def detokenize(body: DetokenizeRequest) -> dict[str, Any]:
        door.model(body.model)
        door.ids(body.tokens, "tokens")
        return {"prompt": await asyncio.to_thread(engine.decode, body.tokens)}

    @app.post("/v1/completions", responses=generation_responses(CompletionResponse))
    async def completions(body: CompletionRequest, raw: Request) -> Response:
        model_name = door.model(body.model)
        prompts = body.prompts
        texts = [p for p in prompts if isinstance(p, str)]
        door.prompt_chars([len(t) for t in texts], "prompt")
        cost = sum(len(t) for t in texts)
        encoded = iter(await tokenizing(cost, lambda: [engine.encode(t) for t in texts]))
        prompt_ids = [next(encoded) if isinstance(p, str) else p for p in prompts]
        for i, ids in enumerate(prompt_ids):
            if not isinstance(prompts[i], str):
                door.ids(ids, "prompt" if len(prompts) == 1 else f"prompt[{i}]")
        echoes = [""] * len(prompts)
        if body.echo:
            echoes = [
                p if isinstance(p, str) else await asyncio.to_thread(engine.decode, p)
                for p in prompts
            ]
        return await _serve(raw, body, prompt_ids, echoes, model_name, chat=False)

    @app.post("/v1/chat/completions", responses=generation_responses(ChatCompletionResponse))
    async def chat(body: ChatCompletionRequest, raw: Request) -> Response:
        model_name = door.model(body.model)
        door.chat_chars(body.messages)
        door.tools_rendered(body.template_tools())
        plan = plan_reply(body, config)
        prepared = await asyncio.to_thread(load_chat_images, body, vision)
        rendered = await render(
            chat_cost(body.messages, body.tools),
            lambda: engine.render_chat(
                body.template_messages(vision.placeholder if prepared and vision else ""),
                tools=body.template_tools(),
                add_generation_prompt=body.add_generation_prompt,
                template_kwargs=body.chat_template_kwargs,
            ),
        )
        ids, ends, images = list(rendered.prompt_ids), rendered.message_end_offsets, None
        if prepared and vision is not None:
            ids, images, ends = await asyncio.to_thread(
                expand_chat_prompt, ids, ends, prepared, vision
            )
        return await _serve(
            raw,
            body,
            [ids],
            [""],
            model_name,
            chat=True,
            ends=ends,
            images=images,
            reply=functools.partial(plan.parser, rendered.text) if plan.parses else None,
            grammar_after=plan.reasoning_end(rendered.text),
            forced=plan,
        )

    async def render(cost: int, work) -> RenderedChat:
        """Render and tokenize on a tokenizer lane; a template error is a 400."""
        try:
            return await tokenizing(cost, work)
        except ChatTemplateError as err:
            raise ApiError(400, str(err), param="messages") from None

    async def _serve(
        raw: Request,
        body: CompletionRequest | ChatCompletionRequest,
        prompt_ids: list[list[int]],
        echoes: list[str],
        model_name: str,
        chat: bool,
        ends: tuple[int, ...] = (),
        images: RequestImages | None = None,
        reply: Callable[[], ReplyParser | None] | None = None,
        grammar_after: str | None = None,
        forced: ReplyPlan | None = None,
    ) -> Response:
        """``reply`` makes each chat choice's parser (reasoning, tool calls), if any;
        ``grammar_after``: the text a structured output starts after (a reasoning end tag);
        ``forced``: a chat request's reply plan, whose forced tool call is its grammar."""
        response_id = new_id("chatcmpl" if chat else "cmpl")
        grammar = await request_grammar(engine, body, grammar_after, forced)
        requests = build_requests(
            engine, door, body, prompt_ids, response_id, ends, images, grammar
        )
        arrival = time.monotonic()
        choices: list[Choice] = []
        try:
            for index, (prompt_index, request) in enumerate(requests):
                stream = engine.generate(request)
                relay = Relay(metrics, arrival)
                echo = echoes[prompt_index]
                choices.append(
                    Choice(
                        index,
                        prompt_index,
                        request,
                        stream,
                        relay,
                        echo,
                        body.num_logprobs,
                        body.echoes_logprobs,
                        reply() if reply is not None else None,
                    )
                )
        except (QueueFullError, EngineStoppedError, RequestError) as err:
            await close_all(choices)
            if isinstance(err, RequestError):
                raise ApiError(400, str(err)) from None
            raise overloaded(str(err)) from None
        if body.stream:
            return StreamingResponse(
                sse(
                    response_id,
                    choices,
                    chat,
                    model_name,
                    body.include_usage,
                    body.continuous_usage,
                    token_text,
                ),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        keep = body.n if body.num_candidates > body.n else None
        result = await collect_or_cancel(
            raw, collect(response_id, choices, chat, model_name, token_text, keep)
        )
        if result is None:
            return Response(status_code=499)
        return json_response(500 if "error" in result else 200, result)

    return app


def chat_cost(messages: Sequence[Any], tools: Sequence[Any] | None = None) -> int:
    """A chat's tokenizer cost in characters: its text content and its tools' JSON.
    (What bounds a chat's length before rendering: ``Door.chat_chars``.)"""
    cost = sum(len(m.text()) for m in messages)
    return cost + sum(len(t.model_dump_json()) for t in tools or ())
