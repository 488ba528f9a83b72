"""OpenAI-compatible request and response bodies.

Requests are validated here, before the engine sees them, so a bad parameter
becomes a 400 with OpenAI's error body and never reaches the scheduler. Fields
we do not implement are rejected by name rather than silently ignored: a client
that asks for logprobs and gets none deserves to know.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ignition.runtime.requests import SamplingParams

MAX_STOP_STRINGS = 8


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


def error_body(message: str, kind: str, param: str | None = None, code: str | None = None) -> dict:
    return ErrorResponse(
        error=ErrorDetail(message=message, type=kind, param=param, code=code)
    ).model_dump()


class StreamOptions(BaseModel):
    include_usage: bool = False


class _SamplingFields(BaseModel):
    """Fields shared by completions and chat completions."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0.0, le=100.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = Field(default=0, ge=0)
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(default=1, ge=1, le=1)
    user: str | None = None
    ignore_eos: bool = False
    # Accepted for compatibility, must stay at their neutral values.
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logprobs: Any = None

    @field_validator("stop")
    @classmethod
    def _stop_list(cls, value: str | list[str] | None) -> list[str]:
        stops = [value] if isinstance(value, str) else list(value or [])
        if len(stops) > MAX_STOP_STRINGS:
            raise ValueError(f"at most {MAX_STOP_STRINGS} stop strings are supported")
        if any(not s for s in stops):
            raise ValueError("stop strings must be non-empty")
        return stops

    @field_validator("presence_penalty", "frequency_penalty")
    @classmethod
    def _neutral_penalty(cls, value: float) -> float:
        if value != 0.0:
            raise ValueError("penalties are not supported; leave them at 0")
        return value

    @field_validator("logprobs")
    @classmethod
    def _no_logprobs(cls, value: Any) -> Any:
        if value not in (None, False):
            raise ValueError("logprobs are not supported")
        return value

    def sampling(self, default_max_tokens: int) -> SamplingParams:
        return SamplingParams(
            max_tokens=self.max_tokens or default_max_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            seed=self.seed,
            stop=tuple(self.stop or ()),
            ignore_eos=self.ignore_eos,
        )

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class CompletionRequest(_SamplingFields):
    prompt: str | list[int]
    echo: bool = False
    suffix: str | None = None
    best_of: int | None = Field(default=None, ge=1, le=1)

    @field_validator("prompt")
    @classmethod
    def _non_empty(cls, value: str | list[int]) -> str | list[int]:
        if not value:
            raise ValueError("the prompt is empty")
        if isinstance(value, list) and any(t < 0 for t in value):
            raise ValueError("token ids must be nonnegative")
        return value

    @field_validator("echo")
    @classmethod
    def _no_echo(cls, value: bool) -> bool:
        if value:
            raise ValueError("echo is not supported")
        return value

    @field_validator("suffix")
    @classmethod
    def _no_suffix(cls, value: str | None) -> str | None:
        if value:
            raise ValueError("suffix is not supported")
        return value


class TextPart(BaseModel):
    type: Literal["text"]
    text: str


class ToolCallFunction(BaseModel):
    name: str
    arguments: str | dict[str, Any] = "{}"


class ToolCall(BaseModel):
    """A call an assistant message made earlier in the conversation."""

    id: str | None = None
    type: Literal["function"] = "function"
    function: ToolCallFunction


class ChatMessage(BaseModel):
    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    reasoning_content: str | None = None

    @model_validator(mode="after")
    def _content_or_calls(self) -> ChatMessage:
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise ValueError(
                "content is required (only an assistant message with tool_calls may omit it)"
            )
        return self

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)

    def for_template(self) -> dict[str, Any]:
        """The message as chat templates read it: text content, optional fields only when set."""
        message = self.model_dump(exclude_none=True, exclude={"content"})
        message["content"] = self.text()
        return message


class ToolFunction(BaseModel):
    name: str = Field(min_length=1)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(BaseModel):
    type: Literal["function"]
    function: ToolFunction


class NamedToolChoice(BaseModel):
    type: Literal["function"]
    function: dict[str, str]


class ChatCompletionRequest(_SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    add_generation_prompt: bool = True

    @field_validator("tool_choice")
    @classmethod
    def _free_tool_choice(cls, value: Any) -> Any:
        if value == "required" or isinstance(value, NamedToolChoice):
            raise ValueError(
                "forcing a tool call needs constrained decoding, which is not supported; "
                "use 'auto' or 'none'"
            )
        return value

    def template_messages(self) -> list[dict[str, Any]]:
        return [m.for_template() for m in self.messages]

    def template_tools(self) -> list[dict[str, Any]] | None:
        """The tools the template describes; none when tool_choice is 'none'."""
        if self.tools is None or self.tool_choice == "none":
            return None
        return [t.model_dump(exclude_none=True) for t in self.tools]

    def sampling(self, default_max_tokens: int) -> SamplingParams:
        if self.max_completion_tokens and not self.max_tokens:
            self.max_tokens = self.max_completion_tokens
        return super().sampling(default_max_tokens)


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def now_s() -> int:
    return int(time.time())


def usage(num_prompt: int, num_output: int) -> dict[str, int]:
    return {
        "prompt_tokens": num_prompt,
        "completion_tokens": num_output,
        "total_tokens": num_prompt + num_output,
    }
