"""Checks at the door: what a request names (the model, token ids, tools) and whether its
prompt can fit the context by its characters alone, before any tokenizer or engine time
is spent on it. Each failure is an ApiError naming the field."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ignition.server.config import ServerConfig
from ignition.server.engine_client import EngineClient
from ignition.server.errors import ApiError
from ignition.server.tokenizing import PromptBound


class Door:
    """The checks of one app: ``engine`` gives the context and the vocabulary, ``names``
    the served model names (the first is reported)."""

    def __init__(self, engine: EngineClient, config: ServerConfig, names: tuple[str, ...]) -> None:
        self._engine = engine
        self._config = config
        self.names = names
        bound = PromptBound(config.max_chars_per_token)
        self.max_prompt_chars = bound.max_prompt_chars(engine.max_context_tokens)

    def model(self, name: str | None) -> str:
        """The served name a request's ``model`` means; a 404 for any other."""
        if name is not None and name not in self.names:
            raise ApiError(
                404,
                f"the model {name!r} does not exist; this server serves "
                + ", ".join(repr(n) for n in self.names),
                param="model",
                code="model_not_found",
            )
        return name or self.names[0]

    def ids(self, ids: Sequence[int], where: str) -> None:
        """Token ids must be ids of the model's vocabulary."""
        vocab = self._engine.vocab_size
        if vocab is None:
            return
        for i, token in enumerate(ids):
            if not 0 <= token < vocab:
                raise ApiError(
                    400,
                    f"{where}[{i}] = {token} is not a token id of this model: its vocabulary "
                    f"has {vocab} ids (0..{vocab - 1})",
                    param=where.split("[")[0],
                )

    def prompt_chars(self, lengths: Sequence[int], where: str, what: str = "") -> None:
        """A prompt too long for the context by its characters alone (``lengths``: of each
        prompt) is refused before it is tokenized (server/tokenizing.py: PromptBound);
        ``what`` says which characters were counted."""
        limit = self.max_prompt_chars
        if limit is None:
            return
        context = self._engine.max_context_tokens
        for i, length in enumerate(lengths):
            if length > limit:
                name = where if len(lengths) == 1 else f"{where}[{i}]"
                raise ApiError(
                    400,
                    f"{name} {'hold' if what else 'has'} {length} characters{what}; this "
                    f"model's context of {context} tokens holds at most {limit} "
                    f"({self._config.max_chars_per_token} characters per token at most, the "
                    "longest its tokenizer produces)",
                    param=where,
                )

    def chat_chars(self, messages: Sequence[Any]) -> None:
        """The same bound for a chat, before it is rendered: over the text every template
        renders (assistant turns aside: a template may drop their reasoning)."""
        length = sum(len(m.text()) for m in messages if m.role != "assistant")
        self.prompt_chars([length], "messages", " of content (assistant turns aside)")

    def tools_rendered(self, tools: Sequence[Any] | None) -> None:
        """Tools on a chat template that never renders them: the model would not see them."""
        if tools is not None and not self._config.template_renders_tools:
            raise ApiError(
                400,
                "tools: this model's chat template does not render tool definitions, so the "
                "model would never see them; send the request without tools (or serve with "
                "a --chat-template that renders `tools`)",
                param="tools",
            )
