"""The Qwen3 coder XML tool-call format (Qwen3-Coder, Qwen3.5 and later): each
``<parameter=...>`` value typed by its tool's schema, the arguments streamed as fragments of
their JSON (docs/server.md, "Tool-call formats: Qwen3 coder XML").
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ignition.server.tools.base import ToolCallParser, register_tool_call_parser
from ignition.server.tools.pieces import Piece, partial_tag_length

FUNCTION = "<function="
PARAMETER = "<parameter="
PARAMETER_END = "</parameter>"
FUNCTION_END = "</function>"
VALUE_ENDS = (PARAMETER, FUNCTION_END)  # what ends a value whose end tag is missing
HEADER = re.compile(r"\s*<function=([^>\n<]+)>")


@register_tool_call_parser
class Qwen3CoderParser(ToolCallParser):
    name = "qwen3_coder"
    aliases = ("qwen3_xml",)
    template_markers = ("<tool_call>", FUNCTION, PARAMETER)

    @classmethod
    def name_problem(cls, name: str) -> str | None:
        """Names sit inside tags (``<function=NAME>``, ``<parameter=NAME>``), stripped of
        surrounding whitespace: a tag character, a line break or such whitespace in a name
        would be read back as another name."""
        if not name or name != name.strip():
            return "it is empty or starts or ends with whitespace"
        bad = sorted({c for c in name if c in "<>\n"})
        if bad:
            return f"it contains {', '.join(map(repr, bad))}"
        return None

    @classmethod
    def call_tag(cls, function: str, schema: dict[str, Any]) -> dict[str, Any]:
        """xgrammar's ``qwen_xml`` tag for one call: a text value may not hold the tags that
        end a value here, so the parser reads back the value the grammar admitted
        (docs/server.md, "Tool-call formats: Qwen3 coder XML")."""
        return {
            "type": "tag",
            "begin": f"{cls.open_tag}\n{FUNCTION}{function}>\n",
            "content": {
                "type": "json_schema",
                "json_schema": schema,
                "style": "qwen_xml",
                "max_whitespace_cnt": 1,
                "excludes": [*VALUE_ENDS, cls.close_tag],
            },
            "end": f"{FUNCTION_END}\n{cls.close_tag}",
        }

    def _parse_header(self, out: list[Piece]) -> bool:
        match = HEADER.match(self._buffer)
        if match is None:
            return False
        self._function = match.group(1).strip()
        self._start_call(out, self._function)
        self._buffer = self._buffer[match.end() :]
        self._num_parameters = 0
        self._function_open = True
        self._in_text: bool | None = None  # inside a text value: None, else "at its start"
        return True

    def _parse_body(self, out: list[Piece]) -> bool:
        if self._in_text is not None:
            return self._text_value(out, final=False)
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
        """A parameter: a text value streams as it arrives, another waits for its end."""
        close = text.find(">")
        if close < 0:
            return False
        key, rest = text[len(PARAMETER) : close].strip(), text[close + 1 :]
        schema = self._schema(key)
        declared = schema.get("type")
        if _is_text(declared) and not _listed(schema):
            self._arguments(out, self._separator() + _dumps(key) + ': "')
            self._buffer, self._in_text = rest, True
            return self._text_value(out, final) or True
        at, tag = self._value_end(rest)
        if tag is None and not final:
            return False
        raw = rest[:at].removeprefix("\n").removesuffix("\n")
        value = listed_value(raw, schema) if _listed(schema) else _NO_VALUE
        value = convert(raw, declared) if value is _NO_VALUE else value
        self._arguments(out, self._separator() + f"{_dumps(key)}: {_dumps(value)}")
        self._buffer = rest[at + (len(tag) if tag == PARAMETER_END else 0) :]
        return True

    def _text_value(self, out: list[Piece], final: bool) -> bool:
        """Stream a text value as JSON string fragments. The newline after the opening tag
        and the one before the end tag are not part of it, so a trailing newline and a
        suffix that may start an end tag are held back."""
        if self._in_text:
            if not self._buffer and not final:
                return False
            self._buffer, self._in_text = self._buffer.removeprefix("\n"), False
        at, tag = self._value_end(self._buffer)
        if tag is None and not final:
            keep = partial_tag_length(self._buffer, (PARAMETER_END, *VALUE_ENDS, self.close_tag))
            ready = self._buffer[: len(self._buffer) - keep]
            ready = ready.removesuffix("\n")
            self._arguments(out, _dumps(ready)[1:-1])
            self._buffer = self._buffer[len(ready) :]
            return False
        self._arguments(out, _dumps(self._buffer[:at].removesuffix("\n"))[1:-1] + '"')
        self._buffer = self._buffer[at + (len(tag) if tag == PARAMETER_END else 0) :]
        self._in_text = None
        return True

    def _value_end(self, rest: str) -> tuple[int, str | None]:
        """Where a value ends (its end tag, or the next tag when a model omits it)."""
        found = [(rest.find(tag), tag) for tag in (PARAMETER_END, *VALUE_ENDS, self.close_tag)]
        found = [(at, tag) for at, tag in found if at >= 0]
        return min(found) if found else (len(rest), None)

    def _schema(self, key: str) -> dict[str, Any]:
        schema = self.parameters.get(self._function, {}).get("properties", {}).get(key, {})
        return schema if isinstance(schema, dict) else {}

    def _separator(self) -> str:
        self._num_parameters += 1
        return "{" if self._num_parameters == 1 else ", "

    def _close_arguments(self, out: list[Piece]) -> None:
        if self._function_open:
            self._arguments(out, "}" if self._num_parameters else "{}")
            self._function_open = False

    def _finish_body(self, out: list[Piece]) -> None:
        if self._in_text is not None:
            self._text_value(out, final=True)
        text = self._buffer.lstrip()
        while self._function_open and text.startswith(PARAMETER):
            if not self._parameter(out, text, final=True):
                break
            text = self._buffer.lstrip()
        self._close_arguments(out)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _types(declared: Any) -> list[Any]:
    return declared if isinstance(declared, list) else [declared] if declared else []


def _is_text(declared: Any) -> bool:
    """A parameter whose value stays text: typed as a string, or not typed at all."""
    types = _types(declared)
    return not types or "string" in types


def _listed(schema: dict[str, Any]) -> bool:
    return isinstance(schema.get("enum"), list) or "const" in schema


def listed_value(raw: str, schema: dict[str, Any]) -> Any:
    """The enum / const value ``raw`` spells: as text, else as JSON (a number, a boolean),
    with or without the whitespace around it; _NO_VALUE when it spells none."""
    choices = schema["enum"] if isinstance(schema.get("enum"), list) else [schema.get("const")]
    for text in (raw, raw.strip()):
        if text in choices:
            return text
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if any(value == c and type(value) is type(c) for c in choices):
            return value
    return _NO_VALUE


def convert(raw: str, declared: Any) -> Any:
    """A parameter's text as the JSON value its schema type says; text when it does not parse."""
    types = _types(declared)
    if _is_text(declared):
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
