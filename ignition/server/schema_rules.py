"""Cross-field rules of the request bodies, written as JSON Schema beside their validators.

A pydantic validator that reads another field (``best_of`` against ``n``, a message's
``content`` against its ``role``) is invisible to the generated schema, so each function
here returns the ``allOf`` entries that state its rule; tests/server/test_schema_rules.py
holds schema and validator equal. Only ``anyOf``, ``properties``, ``required``,
``const``/``enum`` and numeric bounds are used, so schema-driven generators (schemathesis)
produce valid examples; a bound applies only to a present number, as the validators read
an absent field or ``null``.
"""

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
    """A completion's stream-dependent rules in one ``anyOf`` (see the note below).

    Not streamed: ``stream_options`` absent, and ``best_of >= n``, spelled per value k of
    ``n`` (both are integers in 1..max_choices; a null ``best_of`` passes any minimum).
    Streamed: ``best_of`` absent or 1 with ``n`` 1 (the best of several candidates is known
    only once all have finished), and ``prompt_logprobs`` absent or 0.

    Why one flat ``anyOf``: schema-driven generators canonicalise an object's ``allOf`` of
    ``anyOf`` into the product of its branches, and schemathesis gives up beyond about two
    dozen; separate rules for ``best_of``, ``stream_options`` and ``prompt_logprobs`` would
    multiply to 64 branches, this spelling has ``max_choices + 2``.
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
