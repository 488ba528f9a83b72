"""Response bodies as pydantic models, so /openapi.json documents what is sent; the handlers
build plain dicts (the hot path) and tests check real responses against these models."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from ignition.server.body import ErrorResponse


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class CompletionLogprobs(BaseModel):
    """The legacy completions shape (raw logprobs; see server/logprobs.py)."""

    tokens: list[str]
    # null for an echoed prompt's first token (nothing precedes it)
    token_logprobs: list[float | None]
    top_logprobs: list[dict[str, float] | None]
    text_offset: list[int]


class PromptLogprob(BaseModel):
    """vLLM's Logprob: one token's raw logprob at a prompt position and its rank."""

    logprob: float
    rank: int
    decoded_token: str


# One per prompt token, null for the first; keys are token ids.
PromptLogprobs = list[dict[str, PromptLogprob] | None]


class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None


class ChatTokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob]


class ChatLogprobs(BaseModel):
    content: list[ChatTokenLogprob] | None


class CompletionChoice(BaseModel):
    index: int
    text: str
    logprobs: CompletionLogprobs | None = None
    finish_reason: str | None
    stop_reason: int | str | None = None
    prompt_logprobs: PromptLogprobs | None = None


class CompletionResponse(BaseModel):
    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage


class CalledFunction(BaseModel):
    name: str
    arguments: str  # JSON text, as OpenAI sends it


class ToolCallOut(BaseModel):
    id: str
    type: Literal["function"]
    function: CalledFunction


class AssistantMessage(BaseModel):
    """``content`` is null when the reply is only tool calls; ``reasoning_content`` is
    present with --reasoning-parser (null when the reply did not reason)."""

    role: Literal["assistant"]
    content: str | None
    reasoning_content: str | None = None
    tool_calls: list[ToolCallOut] | None = None


class ChatChoice(BaseModel):
    index: int
    message: AssistantMessage
    logprobs: ChatLogprobs | None = None
    finish_reason: str | None
    stop_reason: int | str | None = None


class ChatCompletionResponse(BaseModel):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage
    prompt_logprobs: PromptLogprobs | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str
    root: str
    max_model_len: int


class ModelList(BaseModel):
    object: Literal["list"]
    data: list[ModelCard]


class TokenizeResponse(BaseModel):
    count: int
    max_model_len: int
    tokens: list[int]


class DetokenizeResponse(BaseModel):
    prompt: str


class VersionResponse(BaseModel):
    version: str


class HealthResponse(BaseModel):
    status: Literal["ok"]


def _error(description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"model": ErrorResponse, "description": description}
    if headers:
        entry["headers"] = headers
    return entry


RETRY_AFTER = {"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}}
ERRORS: dict[int | str, dict[str, Any]] = {
    400: _error("invalid request: the message names the field and value"),
    401: _error("missing or wrong API key (only when the server has one)"),
    404: _error("unknown model"),
    413: _error("request body larger than --max-request-bytes"),
    500: _error("the request's execution failed (other requests are unaffected)"),
    503: _error("no room to wait for a slot, or the engine stopped", RETRY_AFTER),
}
# Each event is a JSON chunk (or the literal [DONE]); OpenAPI 3.1 cannot type SSE events.
SSE: dict[str, Any] = {"text/event-stream": {}}


def generation_responses(model: type[BaseModel]) -> dict[int | str, dict[str, Any]]:
    return {200: {"model": model, "content": SSE, "description": "JSON, or SSE when stream"}} | (
        ERRORS
    )
