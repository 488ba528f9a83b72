"""The tool-call parser base class, its registry, and detection from a chat template: a
parser reads one reply incrementally, and a tag cut between chunks never leaks into
content (docs/server.md, "Tool-call parsers").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ignition.server.tools.pieces import (
    CallArguments,
    CallStart,
    Piece,
    TextPiece,
    new_call_id,
    partial_tag_length,
)


class ToolCallParser:
    """Base of the formats; subclasses define the call body (see the module docstring)."""

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    # Strings a chat template that renders this format contains (detection).
    template_markers: ClassVar[tuple[str, ...]]
    open_tag: ClassVar[str] = "<tool_call>"
    close_tag: ClassVar[str] = "</tool_call>"

    def __init__(self, tools: Sequence[Mapping[str, Any]] = ()) -> None:
        # function name -> its JSON-schema parameters ({} when the tool declares none)
        self.parameters: dict[str, dict[str, Any]] = {}
        for tool in tools:
            function = tool.get("function", {})
            self.parameters[function.get("name", "")] = function.get("parameters") or {}
        self._buffer = ""
        self._in_block = False
        self._has_header = False
        self._space = ""  # trailing whitespace of the content, held back
        self._space_before = ""  # what was held back when the current block opened
        self.num_calls = 0

    # Whether a call's arguments are written as JSON (the grammar's mask then drops raw
    # control bytes, as for JSON structured outputs).
    json_arguments: ClassVar[bool] = False

    @classmethod
    def call_tag(cls, function: str, schema: dict[str, Any]) -> dict[str, Any]:
        """xgrammar's structural-tag ``tag`` for one call of ``function`` in this format, its
        arguments following the JSON schema ``schema``: what a forced call's grammar holds
        (server/tools/grammar.py). The text it admits is what this parser reads back."""
        raise NotImplementedError

    @classmethod
    def name_problem(cls, name: str) -> str | None:
        """Why this format cannot write ``name`` (a function's or a parameter's) so that
        the parser reads it back; None: it can. A JSON format carries any string."""
        return None

    def feed(self, text: str) -> list[Piece]:
        self._buffer += text
        out: list[Piece] = []
        while self._step(out):
            pass
        return out

    def finish(self) -> list[Piece]:
        """The end of the reply: flush what was held back, close an unfinished call."""
        out: list[Piece] = []
        if self._in_block and self._has_header:
            self._finish_body(out)
        elif self._in_block and not self._parse_whole(self._buffer, out):
            self._not_a_call(out, self.open_tag + self._buffer)
        elif not self._in_block:
            self._content(out, self._buffer)
        self._buffer = ""
        if self._space and not self.num_calls:
            out.append(TextPiece("content", self._space))
        self._space = ""
        return out

    def _step(self, out: list[Piece]) -> bool:
        """Consume what can be decided now; True when another step may consume more."""
        if not self._in_block:
            at = self._buffer.find(self.open_tag)
            if at < 0:
                keep = partial_tag_length(self._buffer, (self.open_tag,))
                self._content(out, self._buffer[: len(self._buffer) - keep])
                self._buffer = self._buffer[len(self._buffer) - keep :]
                return False
            self._content(out, self._buffer[:at])
            # Whitespace before a call is not content (unless the block is no call).
            self._space_before, self._space = self._space, ""
            self._buffer = self._buffer[at + len(self.open_tag) :]
            self._in_block, self._has_header = True, False
            return True
        if self._has_header:
            return self._parse_body(out)
        if self._parse_header(out):
            self._has_header = True
            return True
        end = self._buffer.find(self.close_tag)
        if end < 0:
            return False
        body, self._buffer = self._buffer[:end], self._buffer[end + len(self.close_tag) :]
        self._in_block = False
        if not self._parse_whole(body, out):
            self._not_a_call(out, self.open_tag + body + self.close_tag)
        return True

    def _content(self, out: list[Piece], text: str) -> None:
        text = self._space + text
        body = text.rstrip()
        if body:
            out.append(TextPiece("content", body))
        self._space = text[len(body) :]

    def _not_a_call(self, out: list[Piece], block: str) -> None:
        self._space = self._space_before
        self._content(out, block)

    def _start_call(self, out: list[Piece], function: str) -> int:
        index = self.num_calls
        self.num_calls += 1
        out.append(CallStart(index, new_call_id(), function))
        return index

    def _arguments(self, out: list[Piece], text: str) -> None:
        if text:
            out.append(CallArguments(self.num_calls - 1, text))

    def _end_block(self, rest_at: int) -> None:
        """The block's closing tag ends at ``rest_at`` in the buffer: back to content."""
        self._buffer = self._buffer[rest_at:]
        self._in_block = self._has_header = False

    # -- what a format defines ---------------------------------------------------------

    def _parse_header(self, out: list[Piece]) -> bool:
        """Start a call when the buffer (the block so far) holds a complete header."""
        raise NotImplementedError

    def _parse_body(self, out: list[Piece]) -> bool:
        """After the header: stream arguments; call ``_end_block`` at the closing tag."""
        raise NotImplementedError

    def _finish_body(self, out: list[Piece]) -> None:
        """The reply ended inside a call whose header parsed."""
        raise NotImplementedError

    def _parse_whole(self, body: str, out: list[Piece]) -> bool:
        """A block whose header never parsed incrementally, read whole; False: not a call."""
        return False


TOOL_CALL_PARSERS: dict[str, type[ToolCallParser]] = {}


def register_tool_call_parser(cls: type[ToolCallParser]) -> type[ToolCallParser]:
    for name in (cls.name, *cls.aliases):
        TOOL_CALL_PARSERS[name] = cls
    return cls


def tool_call_parser_class(name: str) -> type[ToolCallParser]:
    if name not in TOOL_CALL_PARSERS:
        known = ", ".join(sorted(TOOL_CALL_PARSERS))
        raise ValueError(f"--tool-call-parser {name!r}: unknown; choose one of {known}")
    return TOOL_CALL_PARSERS[name]


def detect_tool_call_parser(template_sources: Sequence[str]) -> str | None:
    """The format the chat templates render, or None: the parser all of whose markers a
    template contains, the most specific (most markers) first."""
    found = [
        cls
        for cls in set(TOOL_CALL_PARSERS.values())
        if any(
            all(marker in source for marker in cls.template_markers) for source in template_sources
        )
    ]
    if not found:
        return None
    return max(found, key=lambda cls: len(cls.template_markers)).name
