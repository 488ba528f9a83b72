"""One chat choice's reply, parsed into reasoning, content and tool calls; streamed and
non-streamed replies are the same deltas (docs/server.md, "Parsing a reply").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ignition.server.tools.base import ToolCallParser
from ignition.server.tools.pieces import CallArguments, CallStart, Piece, TextPiece
from ignition.server.tools.reasoning import ReasoningParser


@dataclass
class Call:
    id: str
    name: str
    arguments: str = ""


@dataclass
class Delta:
    """What changed in one step: text per kind, and per call its start and new arguments."""

    content: str = ""
    reasoning: str = ""
    starts: dict[int, CallStart] = field(default_factory=dict)
    arguments: dict[int, str] = field(default_factory=dict)

    def add(self, pieces: Iterable[Piece]) -> None:
        for piece in pieces:
            if isinstance(piece, TextPiece) and piece.kind == "content":
                self.content += piece.text
            elif isinstance(piece, TextPiece):
                self.reasoning += piece.text
            elif isinstance(piece, CallStart):
                self.starts[piece.index] = piece
                self.arguments.setdefault(piece.index, "")
            elif isinstance(piece, CallArguments):
                self.arguments[piece.index] = self.arguments.get(piece.index, "") + piece.text

    def body(self) -> dict[str, Any]:
        """The SSE ``delta``: a call's first entry carries its id, type and name."""
        delta: dict[str, Any] = {}
        if self.reasoning:
            delta["reasoning_content"] = self.reasoning
        if self.content:
            delta["content"] = self.content
        calls = []
        for index, arguments in self.arguments.items():
            entry: dict[str, Any] = {"index": index}
            function: dict[str, Any] = {"arguments": arguments}
            start = self.starts.get(index)
            if start is not None:
                entry.update(id=start.id, type="function")
                function = {"name": start.name, "arguments": arguments}
            entry["function"] = function
            calls.append(entry)
        if calls:
            delta["tool_calls"] = calls
        return delta


class ReplyParser:
    """Reasoning first, then tool calls, over one choice's reply."""

    def __init__(
        self,
        reasoning: ReasoningParser | None,
        tools: ToolCallParser | None,
        forced: bool = False,
        single_call: bool = False,
    ) -> None:
        """``single_call``: keep only the reply's first call (``parallel_tool_calls`` false)."""
        self._reasoning = reasoning
        self._tools = tools
        self._forced = forced
        self._single_call = single_call
        self.shows_reasoning = reasoning is not None
        self.content = ""
        self.reasoning = ""
        self.calls: list[Call] = []
        self.failure: str | None = None

    def step(self, text: str, final: bool = False) -> Delta:
        """Parse the next text of the reply (``final``: the reply ends with it)."""
        reasoning = self._reasoning
        fresh = self._route(reasoning.feed(text) if reasoning else [TextPiece("content", text)])
        if final:
            fresh += self._route(reasoning.finish() if reasoning else [])
            fresh += self._tools.finish() if self._tools else []
        if self._single_call:
            fresh = [p for p in fresh if isinstance(p, TextPiece) or p.index == 0]
        self._record(fresh)
        delta = Delta()
        delta.add(fresh)
        return delta

    def _route(self, pieces: Iterable[Piece]) -> list[Piece]:
        routed: list[Piece] = []
        for piece in pieces:
            if self._tools is not None and isinstance(piece, TextPiece) and piece.kind == "content":
                routed += self._tools.feed(piece.text)
            else:
                routed.append(piece)
        return routed

    def _record(self, pieces: Iterable[Piece]) -> None:
        for piece in pieces:
            if isinstance(piece, TextPiece) and piece.kind == "content":
                self.content += piece.text
            elif isinstance(piece, TextPiece):
                self.reasoning += piece.text
            elif isinstance(piece, CallStart):
                self.calls.append(Call(piece.id, piece.name))
                declared = self._tools.parameters if self._tools else {}
                if self._forced and piece.name not in declared and self.failure is None:
                    self.failure = f"the reply calls {piece.name!r}, a function no tool declares"
            else:
                self.calls[piece.index].arguments += piece.text

    def message(self) -> dict[str, Any]:
        """The non-streamed assistant message."""
        message: dict[str, Any] = {"role": "assistant"}
        # vLLM's null: no content beside calls, or a reply that only reasoned
        empty = not self.content and (self.calls or self.shows_reasoning)
        message["content"] = None if empty else self.content
        if self.shows_reasoning:
            message["reasoning_content"] = self.reasoning or None
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.calls
            ]
        return message
