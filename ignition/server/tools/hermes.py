"""JSON in ``<tool_call>`` (the Hermes convention, Qwen2.5 and Qwen3), the arguments
streamed as the model writes them (docs/server.md, "Tool-call formats: Hermes JSON").
"""

from __future__ import annotations

import json
import re
from typing import Any

from ignition.server.tools.base import ToolCallParser, register_tool_call_parser
from ignition.server.tools.pieces import Piece, partial_tag_length

HEADER = re.compile(r'\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*')


@register_tool_call_parser
class HermesParser(ToolCallParser):
    name = "hermes"
    template_markers = ("<tool_call>",)

    json_arguments = True

    @classmethod
    def call_tag(cls, function: str, schema: dict[str, Any]) -> dict[str, Any]:
        """``{"name": NAME, "arguments": ARGS}`` with ARGS a JSON value of ``schema`` (at most
        one whitespace character between its tokens)."""
        return {
            "type": "tag",
            "begin": f'{cls.open_tag}\n{{"name": {json.dumps(function)}, "arguments": ',
            "content": {"type": "json_schema", "json_schema": schema, "max_whitespace_cnt": 1},
            "end": f"}}\n{cls.close_tag}",
        }

    def _parse_header(self, out: list[Piece]) -> bool:
        match = HEADER.match(self._buffer)
        if match is None:
            return False
        try:
            function = json.loads(f'"{match.group(1)}"')
        except ValueError:
            return False
        self._start_call(out, function)
        self._buffer = self._buffer[match.end() :]
        self._depth, self._in_string, self._escaped = 0, False, False
        self._started = self._done = False
        return True

    def _parse_body(self, out: list[Piece]) -> bool:
        text, written = self._buffer, []
        i = 0
        while i < len(text):
            if self._done:
                end = text.find(self.close_tag, i)
                if end < 0:
                    i = len(text) - partial_tag_length(text[i:], (self.close_tag,))
                    break
                self._arguments(out, "".join(written))
                self._end_block(end + len(self.close_tag))
                return True
            char = text[i]
            if char == "<" and not self._in_string:
                if text.startswith(self.close_tag, i):  # the value never closed
                    self._arguments(out, "".join(written))
                    self._end_block(i + len(self.close_tag))
                    return True
                if self.close_tag.startswith(text[i:]):
                    break
            if self._started or not char.isspace():
                self._started = True
                written.append(char)
                self._scan(char)
            i += 1
        self._arguments(out, "".join(written))
        self._buffer = text[i:]
        return False

    def _scan(self, char: str) -> None:
        """Track where the arguments' JSON value ends."""
        if self._in_string:
            if self._escaped:
                self._escaped = False
            elif char == "\\":
                self._escaped = True
            elif char == '"':
                self._in_string = False
                self._done = self._depth == 0
        elif char == '"':
            self._in_string = True
        elif char in "{[":
            self._depth += 1
        elif char in "}]":
            self._depth -= 1
            self._done = self._depth <= 0

    def _finish_body(self, out: list[Piece]) -> None:
        if not self._done:
            text = self._buffer
            if not self._started:
                text = text.lstrip()
            self._arguments(out, text)

    def _parse_whole(self, body: str, out: list[Piece]) -> bool:
        try:
            call = json.loads(body)
        except ValueError:
            return False
        if not (isinstance(call, dict) and isinstance(call.get("name"), str)):
            return False
        arguments: Any = call.get("arguments", call.get("parameters", {}))
        self._start_call(out, call["name"])
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        self._arguments(out, arguments)
        return True
