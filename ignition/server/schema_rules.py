"""Cross-field rules of the request bodies as JSON Schema beside their validators: each
function returns the ``allOf`` entries stating one rule, which tests/server/test_schema_rules.py
holds equal to the validator (docs/server.md, "Schema rules")."""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]


def _absent_or_null(name: str) -> Schema:
    return {"properties": {name: {"type": "null"}}}


def stream_options_need_stream() -> list[Schema]:
    """``stream_options`` only with ``stream: true`` (as vLLM)."""
    return [
        {
            "anyOf": [
                _absent_or_null("stream_options"),
                {"properties": {"stream": {"const": True}}, "required": ["stream"]},
            ]
        }
    ]


def not_streamed(name: str, neutral: Any) -> list[Schema]:
    """``name`` above its neutral value only without ``stream: true``."""
    return [
        {
            "anyOf": [
                {"properties": {"stream": {"enum": [False, None]}}},
                {"properties": {name: {"anyOf": [{"type": "null"}, {"const": neutral}]}}},
            ]
        }
    ]


def completion_rules(max_choices: int) -> list[Schema]:
    """A completion's stream-dependent rules in one flat ``anyOf`` of ``max_choices + 2``
    branches. Not streamed: no ``stream_options``, ``best_of >= n`` spelled per value of
    ``n``. Streamed: ``best_of`` absent or 1 with ``n`` 1, ``prompt_logprobs`` absent or 0.
    """
    not_streamed = {"stream": {"enum": [False, None]}, "stream_options": {"type": "null"}}
    branches: list[Schema] = [{"properties": {**not_streamed, "n": {"maximum": 1}}}]
    for k in range(2, max_choices + 1):
        bounds = {"n": {"minimum": k, "maximum": k}, "best_of": {"minimum": k}}
        branches.append({"properties": {**not_streamed, **bounds}, "required": ["n"]})
    streamed = {
        "stream": {"const": True},
        "prompt_logprobs": {"anyOf": [{"type": "null"}, {"const": 0}]},
    }
    branches.append(
        {"properties": {**streamed, "best_of": {"type": "null"}}, "required": ["stream"]}
    )
    branches.append(
        {
            "properties": {**streamed, "best_of": {"maximum": 1}, "n": {"maximum": 1}},
            "required": ["stream"],
        }
    )
    return [{"anyOf": branches}]


def requires_true(name: str, flag: str) -> list[Schema]:
    """``name`` only together with ``flag: true`` (``top_logprobs`` needs ``logprobs``)."""
    return [
        {
            "anyOf": [
                _absent_or_null(name),
                {"properties": {flag: {"const": True}}, "required": [flag]},
            ]
        }
    ]


def content_or_tool_calls() -> list[Schema]:
    """A message has content, unless it is an assistant message with at least one call."""
    return [
        {
            "anyOf": [
                {"properties": {"content": {"type": ["string", "array"]}}, "required": ["content"]},
                {
                    "properties": {
                        "role": {"const": "assistant"},
                        "tool_calls": {"type": "array", "minItems": 1},
                    },
                    "required": ["role", "tool_calls"],
                },
            ]
        }
    ]


def add_rules(schema: Schema, rules: list[Schema]) -> None:
    """Append ``rules`` to the schema's ``allOf`` (pydantic's ``json_schema_extra`` hook)."""
    if rules:
        schema.setdefault("allOf", []).extend(rules)
