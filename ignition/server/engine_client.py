"""What the HTTP layer needs from an engine: the protocol the runtime's AsyncEngine
implements and the tests' scripted engines imitate, so the server never probes for
optional attributes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Protocol

from ignition.runtime.chat.template import RenderedChat
from ignition.runtime.grammar import GrammarSpec, RequestGrammar
from ignition.runtime.loop.stats import EngineStats
from ignition.runtime.requests.generation_config import GenerationDefaults
from ignition.runtime.requests.request import GenerationRequest, StreamChunk


class EngineClient(Protocol):
    model_name: str
    max_context_tokens: int
    default_max_tokens: int
    vocab_size: int | None  # None: token ids are not checked against a vocabulary
    stats: EngineStats
    generation_defaults: GenerationDefaults

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """``add_special_tokens`` False is passed only when asked for (/tokenize)."""
        ...

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str: ...

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

    def compile_grammar(self, spec: GrammarSpec) -> RequestGrammar:
        """A structured output's grammar; raises GrammarError naming the field (a 400),
        also when this engine has no structured outputs at all."""
        ...

    def generate(self, request: GenerationRequest) -> AsyncIterator[StreamChunk]:
        """Admit now (raising QueueFullError or RequestError) and stream published chunks;
        closing the iterator early cancels the request."""
        ...

    def is_healthy(self) -> bool: ...
