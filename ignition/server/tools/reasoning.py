"""Reasoning parsers: the model's thinking becomes ``reasoning_content`` (``qwen3``:
``<think>...</think>``; docs/server.md, "Reasoning").
"""

from __future__ import annotations

from typing import ClassVar

from ignition.server.tools.pieces import TextPiece, partial_tag_length


class ReasoningParser:
    """Splits one reply into reasoning and content, incrementally."""

    name: ClassVar[str]
    start_tag: ClassVar[str]
    end_tag: ClassVar[str]

    def __init__(self, in_reasoning: bool, thinking: bool = True) -> None:
        """``in_reasoning``: the prompt left a reasoning block open; ``thinking``: False
        when the request turned thinking off."""
        self._state = "reasoning" if in_reasoning and thinking else "start"
        self._thinking = thinking
        self._buffer = ""
        self._space = ""  # reasoning's trailing whitespace, held until more reasoning follows
        self._strip = True  # drop the whitespace that opens the current part

    def feed(self, text: str) -> list[TextPiece]:
        self._buffer += text
        out: list[TextPiece] = []
        while self._step(out, final=False):
            pass
        return out

    def finish(self) -> list[TextPiece]:
        out: list[TextPiece] = []
        while self._step(out, final=True):
            pass
        if self._buffer:
            self._emit(out, "reasoning" if self._state == "reasoning" else "content", self._buffer)
        self._buffer = ""
        return out

    def _step(self, out: list[TextPiece], final: bool) -> bool:
        if self._state == "start":
            return self._opening(out, final)
        if self._state == "reasoning":
            end = self._buffer.find(self.end_tag)
            if end >= 0:
                self._emit(out, "reasoning", self._buffer[:end])
                self._buffer = self._buffer[end + len(self.end_tag) :]
                self._state, self._space, self._strip = "content", "", True
                return True
            keep = 0 if final else partial_tag_length(self._buffer, (self.end_tag,))
            self._emit(out, "reasoning", self._buffer[: len(self._buffer) - keep])
            self._buffer = self._buffer[len(self._buffer) - keep :]
            return False
        self._emit(out, "content", self._buffer)
        self._buffer = ""
        return False

    def _opening(self, out: list[TextPiece], final: bool) -> bool:
        """At the reply's start: a reasoning block (thinking on), an empty block to remove
        (thinking off), or content."""
        text = self._buffer.lstrip()
        if text.startswith(self.start_tag):
            rest = text[len(self.start_tag) :]
            if self._thinking:
                self._buffer, self._state = rest, "reasoning"
                return True
            inner = rest.lstrip()
            if inner.startswith(self.end_tag):
                self._buffer, self._state = inner[len(self.end_tag) :], "content"
                return True
            if not final and self.end_tag.startswith(inner):
                return False
        elif not final and self.start_tag.startswith(text):
            return False
        self._state, self._strip = "content", False
        return True

    def _emit(self, out: list[TextPiece], kind: str, text: str) -> None:
        if self._strip:
            text = text.lstrip()
            self._strip = not text
        if kind == "reasoning":
            text = self._space + text
            body = text.rstrip()
            self._space = text[len(body) :]
            text = body
        if text:
            out.append(TextPiece(kind, text))  # type: ignore[arg-type]


REASONING_PARSERS: dict[str, type[ReasoningParser]] = {}


def register_reasoning_parser(cls: type[ReasoningParser]) -> type[ReasoningParser]:
    REASONING_PARSERS[cls.name] = cls
    return cls


def reasoning_parser_class(name: str) -> type[ReasoningParser]:
    if name not in REASONING_PARSERS:
        known = ", ".join(sorted(REASONING_PARSERS))
        raise ValueError(f"--reasoning-parser {name!r}: unknown; choose one of {known}")
    return REASONING_PARSERS[name]


@register_reasoning_parser
class Qwen3ReasoningParser(ReasoningParser):
    name = "qwen3"
    start_tag = "<think>"
    end_tag = "</think>"


def opens_reasoning(prompt: str, start_tag: str = "<think>", end_tag: str = "</think>") -> bool:
    """Whether the rendered prompt leaves a reasoning block open (the reply starts in it)."""
    return prompt.rfind(start_tag) > prompt.rfind(end_tag)
