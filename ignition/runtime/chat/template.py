"""Render a conversation with the checkpoint's chat template, as Hugging Face does."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jinja2

from ignition.runtime.chat.offsets import EncodeBatch, message_end_offsets
from ignition.runtime.chat.sandbox import chat_environment, plain_data
from ignition.runtime.chat.template_files import ChatTemplates

RESERVED_VARIABLES = ("messages", "tools", "add_generation_prompt")


class ChatTemplateError(ValueError):
    """The chat template cannot render this request (maps to HTTP 400)."""


@dataclass(frozen=True)
class RenderedChat:
    """A rendered conversation: its text, its prompt ids, and where each message ends."""

    text: str
    prompt_ids: tuple[int, ...]
    message_end_offsets: tuple[int, ...]


def _template_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """A message as templates expect it: tool-call arguments as an object, not a JSON string."""
    out = plain_data(message)
    calls = out.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                try:
                    parsed = json.loads(function["arguments"])
                except json.JSONDecodeError:
                    continue
                if isinstance(parsed, dict):
                    function["arguments"] = parsed
    return out


class ChatRenderer:
    """Renders conversations with a checkpoint's templates and tokenizes them."""

    def __init__(
        self,
        templates: ChatTemplates,
        encode_batch: EncodeBatch,
        split_tokens: Sequence[str] = (),
    ) -> None:
        self.templates = templates
        self._encode_batch = encode_batch
        self._split_tokens = tuple(split_tokens)
        self._env = chat_environment()
        self._compiled: dict[str, jinja2.Template | ChatTemplateError] = {}

    def problem(self) -> str | None:
        """Why the default template cannot compile, or None; for a warning at startup."""
        try:
            self._template(*self.templates.select(has_tools=False))
        except ChatTemplateError as err:
            return str(err)
        return None

    def _template(self, name: str, source: str) -> jinja2.Template:
        compiled = self._compiled.get(name)
        if compiled is None:
            try:
                compiled = self._env.from_string(source)
            except jinja2.TemplateSyntaxError as err:
                compiled = ChatTemplateError(
                    f"{self.templates.source}: chat template {name!r} line {err.lineno}: "
                    f"syntax error: {err.message}"
                )
            self._compiled[name] = compiled
        if isinstance(compiled, ChatTemplateError):
            raise compiled
        return compiled

    def render_text(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> str:
        template, variables = self._prepare(tools, template_kwargs)
        return self._render(
            template, [_template_message(m) for m in messages], variables, add_generation_prompt
        )

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> RenderedChat:
        """Render, tokenize, and find each message's end offset (offsets.py)."""
        template, variables = self._prepare(tools, template_kwargs)
        chat = [_template_message(m) for m in messages]
        text = self._render(template, chat, variables, add_generation_prompt)
        prefixes: list[str | None] = []
        for i in range(len(chat)):
            try:
                prefixes.append(self._render(template, chat[: i + 1], variables, False))
            except ChatTemplateError:
                prefixes.append(None)
        prompt_ids = self._encode_batch([text])[0]
        offsets = message_end_offsets(
            text, prompt_ids, prefixes, self._encode_batch, self._split_tokens
        )
        return RenderedChat(text, tuple(prompt_ids), offsets)

    def _prepare(
        self,
        tools: Sequence[Mapping[str, Any]] | None,
        template_kwargs: Mapping[str, Any] | None,
    ) -> tuple[jinja2.Template, dict[str, Any]]:
        kwargs = dict(template_kwargs or {})
        for name in kwargs:
            if name in RESERVED_VARIABLES:
                raise ChatTemplateError(
                    f"chat_template_kwargs.{name}: reserved; pass it as the request's own field"
                )
        template = self._template(*self.templates.select(has_tools=tools is not None))
        variables = {
            **self.templates.special_tokens,
            **plain_data(kwargs),
            "tools": plain_data(list(tools)) if tools is not None else None,
        }
        return template, variables

    def _render(
        self,
        template: jinja2.Template,
        messages: list[dict[str, Any]],
        variables: dict[str, Any],
        add_generation_prompt: bool,
    ) -> str:
        try:
            return template.render(
                messages=messages, add_generation_prompt=add_generation_prompt, **variables
            )
        except jinja2.UndefinedError as err:
            raise ChatTemplateError(f"chat template: undefined value: {err.message}") from None
        except jinja2.TemplateError as err:  # raise_exception, sandbox refusals
            raise ChatTemplateError(f"chat template rejected the request: {err.message}") from None
        except Exception as err:  # a template is code: any failure is the request's 400
            raise ChatTemplateError(f"chat template failed: {type(err).__name__}: {err}") from None
