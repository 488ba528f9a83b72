"""OpenAI-compatible chat bodies (messages with text and image parts, tools and calls) and
/tokenize for messages, under server/body.py's rules and server/sampling_fields.py's fields."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from ignition.runtime.requests.request import SamplingParams
from ignition.server import schema_rules
from ignition.server.body import (
    NOT_SERVED,
    Body,
    Bool,
    Int,
    NeutralFalse,
    PositiveInt,
    Text,
    valid_unicode,
)
from ignition.server.protocol import TokenizeCompletionRequest
from ignition.server.sampling_fields import MAX_LOGPROBS, SamplingFields


class TextPart(Body):
    type: Literal["text"]
    text: Text


class ImageUrl(Body):
    url: Text
    detail: Literal["auto", "low", "high"] | None = None


class ImagePart(Body):
    """An image (server/images.py decodes it; only vision models accept it)."""

    type: Literal["image_url"]
    image_url: ImageUrl


ContentPart = Annotated[TextPart | ImagePart, Field(discriminator="type")]


class ToolCallFunction(Body):
    name: Text
    arguments: Text | dict[str, Any] = "{}"


class ToolCall(Body):
    """A call an assistant message made earlier in the conversation."""

    id: Text | None = None
    type: Literal["function"] = "function"
    function: ToolCallFunction


class ChatMessage(Body):
    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: Text | list[ContentPart] | None = None
    name: Text | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: Text | None = None
    reasoning_content: Text | None = None

    @classmethod
    def schema_rules(cls) -> list[dict[str, Any]]:
        return schema_rules.content_or_tool_calls()

    @model_validator(mode="after")
    def _content_or_calls(self) -> ChatMessage:
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise ValueError(
                "content is required (only an assistant message with tool_calls may omit it)"
            )
        return self

    def text(self, image_text: str = "") -> str:
        """The content as text; each image part becomes ``image_text`` (its placeholder)."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(
            part.text if isinstance(part, TextPart) else image_text for part in self.content
        )

    def for_template(self, image_text: str = "") -> dict[str, Any]:
        """The message as chat templates read it: text content, optional fields only when set."""
        message = self.model_dump(exclude_none=True, exclude={"content"})
        message["content"] = self.text(image_text)
        return message


class ToolFunction(Body):
    name: Annotated[str, Field(strict=True, min_length=1), AfterValidator(valid_unicode)]
    description: Text | None = None
    parameters: dict[str, Any] | None = None
    strict: Bool | None = None


class Tool(Body):
    type: Literal["function"]
    function: ToolFunction


class NamedFunction(Body):
    name: Text


class NamedToolChoice(Body):
    """``{"type": "function", "function": {"name": ...}}``: call this function."""

    type: Literal["function"]
    function: NamedFunction


class ChatCompletionRequest(SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: PositiveInt | None = None
    logprobs: Bool = False
    top_logprobs: Annotated[Int, Field(ge=0, le=MAX_LOGPROBS)] | None = None
    tools: list[Tool] | None = None
    # "required" and a named function are enforced by a grammar (server/tools/grammar.py).
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: Bool | None = None  # false: only a reply's first call is returned
    chat_template_kwargs: dict[str, Any] | None = None
    add_generation_prompt: Bool = True

    @classmethod
    def schema_rules(cls) -> list[dict[str, Any]]:
        return [*super().schema_rules(), *schema_rules.requires_true("top_logprobs", "logprobs")]

    @field_validator("tool_choice")
    @classmethod
    def _forced_call_of_a_declared_tool(cls, choice: Any, info) -> Any:
        """A forced call needs tools, and a named one must be among them."""
        if choice is None or choice in ("none", "auto"):
            return choice
        shown = "'required'" if choice == "required" else "a named function"
        tools = info.data.get("tools")
        if not tools:
            raise ValueError(f"{shown} needs tools")
        declared = [tool.function.name for tool in tools]
        if isinstance(choice, NamedToolChoice) and choice.function.name not in declared:
            raise ValueError(
                f"names the function {choice.function.name!r}, which no tool declares "
                f"(declared: {', '.join(map(repr, declared))})"
            )
        return choice

    @property
    def named_function(self) -> str | None:
        """The function a named tool_choice forces (None: not named)."""
        if isinstance(self.tool_choice, NamedToolChoice):
            return self.tool_choice.function.name
        return None

    def template_messages(self, image_text: str = "") -> list[dict[str, Any]]:
        return [m.for_template(image_text) for m in self.messages]

    def template_tools(self) -> list[dict[str, Any]] | None:
        """The tools the template describes; none when tool_choice is 'none'."""
        if self.tools is None or self.tool_choice == "none":
            return None
        return [t.model_dump(exclude_none=True) for t in self.tools]

    @field_validator("top_logprobs")
    @classmethod
    def _top_logprobs_need_logprobs(cls, value: int | None, info) -> int | None:
        if value is not None and not info.data.get("logprobs"):
            raise ValueError("top_logprobs needs logprobs = true")
        return value

    @property
    def num_logprobs(self) -> int | None:
        return (self.top_logprobs or 0) if self.logprobs else None

    @property
    def num_candidates(self) -> int:
        return self.n

    def sampling(self, default_max_tokens: int, vocab_size: int | None = None) -> SamplingParams:
        if self.max_completion_tokens and not self.max_tokens:
            self.max_tokens = self.max_completion_tokens
        return super().sampling(default_max_tokens, vocab_size)


class TokenizeChatRequest(Body):
    """vLLM's /tokenize for chat messages, rendered with the chat template as a chat
    completion with the same fields is (``add_special_tokens``: the tokenizer's own
    special tokens around the rendered text too; off by default, as in vLLM, since the
    template writes them). vLLM's fields this server does not serve (a request's own
    ``chat_template``, ``continue_final_message``, ``mm_processor_kwargs``,
    ``return_token_strs``) are a 400 naming them unless neutral."""

    model: Text | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    add_generation_prompt: Bool = True
    add_special_tokens: Bool = False
    chat_template_kwargs: dict[str, Any] | None = None
    tools: list[Tool] | None = None
    # vLLM's fields this server does not serve: only their neutral values (the schema says
    # so; the validators name the field).
    continue_final_message: NeutralFalse = False
    chat_template: Annotated[str, Field(max_length=0)] | None = None
    mm_processor_kwargs: Annotated[dict[str, Any], Field(max_length=0)] | None = None
    return_token_strs: NeutralFalse = False

    @field_validator(
        "continue_final_message", "chat_template", "mm_processor_kwargs", "return_token_strs",
        mode="before",
    )  # fmt: skip
    @classmethod
    def _not_served(cls, value: Any, info) -> Any:
        if value:
            raise ValueError(f"{info.field_name} is not supported by this server: {NOT_SERVED}")
        return value

    def template_tools(self) -> list[dict[str, Any]] | None:
        if self.tools is None:
            return None
        return [t.model_dump(exclude_none=True) for t in self.tools]


def _tokenize_kind(body: Any) -> str:
    """Which /tokenize body this is: one with ``messages`` is a chat."""
    if isinstance(body, dict) and "messages" in body:
        return "TokenizeChatRequest"
    if isinstance(body, TokenizeChatRequest):
        return "TokenizeChatRequest"
    return "TokenizeCompletionRequest"


# /tokenize's body, told apart by its fields before validation: trying both members (a
# plain union) logged the other member's fields as unknown on every call. The tags are the
# class names, which error locations leave out (server/errors.py).
TokenizeRequest = Annotated[
    Annotated[TokenizeCompletionRequest, Tag("TokenizeCompletionRequest")]
    | Annotated[TokenizeChatRequest, Tag("TokenizeChatRequest")],
    Discriminator(_tokenize_kind),
]
