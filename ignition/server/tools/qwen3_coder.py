"""The Qwen3 coder XML format (Qwen3-Coder, Qwen3.5 and later):

    <tool_call>
    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    </function>
    </tool_call>

Each parameter's text becomes a JSON value by the type its tool's schema declares
(an integer, a number, a boolean, an object or array as JSON; a string, or a
parameter the schema does not type, stays text). Arguments stream one complete
parameter at a time, as fragments of ``json.dumps`` of the arguments object, so
the fragments join into exactly the non-streamed arguments. Models sometimes omit
``</parameter>``: the next ``<parameter=``, ``</function>`` or ``</tool_call>``
ends the value too.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ignition.server.tools.base import ToolCallParser, register_tool_call_parser
from ignition.server.tools.pieces import Piece

FUNCTION = "<function="
PARAMETER = "<parameter="
PARAMETER_END = "</parameter>"
FUNCTION_END = "</function>"
HEADER = re.compile(r"\s*<function=([^>\n<]+)>")


@register_tool_call_parser
class Qwen3CoderParser(ToolCallParser):
    name = "qwen3_coder"
    aliases = ("qwen3_xml",)
    template_markers = ("<tool_call>", FUNCTION, PARAMETER)

    @classmethod
    def opening(cls, function: str | None) -> str:
        return f"{cls.open_tag}\n{FUNCTION}" + (f"{function}>\n" if function else "")

    def _parse_header(self, out: list[Piece]) -> bool:
        match = HEADER.match(self._buffer)
        if match is None:
            return False
        self._function = match.group(1).strip()
        self._start_call(out, self._function)
        self._buffer = self._buffer[match.end() :]
        self._num_parameters = 0
        self._function_open = True
        return True

    def _parse_body(self, out: list[Piece]) -> bool:
        text = self._buffer.lstrip()
        skipped = len(self._buffer) - len(text)
        if self._function_open and text.startswith(PARAMETER):
            return self._parameter(out, text, final=False)
        if self._function_open and text.startswith(FUNCTION_END):
            self._close_arguments(out)
            self._buffer = text[len(FUNCTION_END) :]
            return True
        if text.startswith(self.close_tag):
            self._close_arguments(out)
            self._end_block(skipped + len(self.close_tag))
            return True
        if not self._function_open and text.startswith(FUNCTION):
            match = HEADER.match(text)  # a second function in the same block
            if match is None:
                return False
            self._buffer = text
            return self._parse_header(out)
        tags = (PARAMETER, FUNCTION_END, self.close_tag, FUNCTION)
        if not text or any(tag.startswith(text) for tag in tags):
            return False  # a tag may be arriving
        stray = text.find("<", 1)  # text between tags is not part of any value: dropped
        self._buffer = text[stray:] if stray > 0 else ""
        return stray > 0

    def _parameter(self, out: list[Piece], text: str, final: bool) -> bool:
        close = text.find(">")
        if close < 0:
            return False
        rest = text[close + 1 :]
        ends = [(rest.find(tag), tag) for tag in (PARAMETER_END, PARAMETER, FUNCTION_END)]
        ends.append((rest.find(self.close_tag), self.close_tag))
        found = [(at, tag) for at, tag in ends if at >= 0]
        if not found and not final:
            return False
        at, tag = min(found) if found else (len(rest), "")
        self._emit_parameter(out, text[len(PARAMETER) : close].strip(), rest[:at])
        used = close + 1 + at + (len(tag) if tag == PARAMETER_END else 0)
        self._buffer = text[used:]
        return True

    def _emit_parameter(self, out: list[Piece], key: str, raw: str) -> None:
        raw = raw.removeprefix("\n").removesuffix("\n")
        schema = self.parameters.get(self._function, {}).get("properties", {}).get(key, {})
        value = convert(raw, schema.get("type") if isinstance(schema, dict) else None)
        separator = "{" if self._num_parameters == 0 else ", "
        self._num_parameters += 1
        item = f"{json.dumps(key, ensure_ascii=False)}: {json.dumps(value, ensure_ascii=False)}"
        self._arguments(out, separator + item)

    def _close_arguments(self, out: list[Piece]) -> None:
        if self._function_open:
            self._arguments(out, "}" if self._num_parameters else "{}")
            self._function_open = False

    def _finish_body(self, out: list[Piece]) -> None:
        text = self._buffer.lstrip()
        while self._function_open and text.startswith(PARAMETER):
            if not self._parameter(out, text, final=True):
                break
            text = self._buffer.lstrip()
        self._close_arguments(out)


def convert(raw: str, declared: Any) -> Any:
    """A parameter's text as the JSON value its schema type says; text when it does not parse."""
    types = declared if isinstance(declared, list) else [declared] if declared else []
    if not types or "string" in types:
        return raw
    for kind in types:
        value = _as(raw.strip(), kind)
        if value is not _NO_VALUE:
            return value
    return raw


_NO_VALUE = object()


def _as(text: str, kind: Any) -> Any:
    try:
        if kind == "integer":
            return int(text)
        if kind == "number":
            number = int(text) if re.fullmatch(r"-?\d+", text) else float(text)
            return number if math.isfinite(number) else _NO_VALUE
        if kind == "boolean" and text.lower() in ("true", "false"):
            return text.lower() == "true"
        if kind == "null" and text == "null":
            return None
        if kind in ("object", "array"):
            value = json.loads(text)
            if isinstance(value, dict if kind == "object" else list):
                return value
    except ValueError:
        pass
    return _NO_VALUE
