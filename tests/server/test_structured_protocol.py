"""Which grammar each structured-output field asks for, and where a reasoning reply's
grammar starts (server/structured_protocol.py, server/tools/choice.py)."""

from __future__ import annotations

import json

import pytest

from ignition.server.chat_protocol import ChatCompletionRequest
from ignition.server.config import ServerConfig
from ignition.server.protocol import CompletionRequest
from ignition.server.tools.choice import plan_reply

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}}
USER = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("extra", "kind", "field"),
    [
        ({"response_format": {"type": "json_object"}}, "json_object", "response_format"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"schema": SCHEMA}}},
            "json_schema",
            "response_format.json_schema",
        ),
        ({"structured_outputs": {"json": SCHEMA}}, "json_schema", "structured_outputs.json"),
        ({"structured_outputs": {"regex": "a+"}}, "regex", "structured_outputs.regex"),
        ({"structured_outputs": {"choice": ["a"]}}, "choice", "structured_outputs.choice"),
        (
            {"structured_outputs": {"grammar": "root ::= 'a'"}},
            "grammar",
            "structured_outputs.grammar",
        ),
        (
            {"structured_outputs": {"json_object": True}},
            "json_object",
            "structured_outputs.json_object",
        ),
        ({"guided_json": json.dumps(SCHEMA)}, "json_schema", "guided_json"),
        ({"guided_regex": "a+"}, "regex", "guided_regex"),
        ({"guided_choice": ["a", "b"]}, "choice", "guided_choice"),
        ({"guided_grammar": "root ::= 'a'"}, "grammar", "guided_grammar"),
    ],
)
def test_each_structured_output_field_asks_for_its_grammar_naming_itself(extra, kind, field):
    spec = CompletionRequest(prompt="x", **extra).grammar_spec()
    assert (spec.kind, spec.field) == (kind, field)


def test_a_schema_is_passed_on_as_given_and_a_choice_as_its_list():
    spec = CompletionRequest(prompt="x", guided_json=SCHEMA).grammar_spec()
    assert json.loads(spec.source) == SCHEMA
    spec = CompletionRequest(prompt="x", guided_choice=["a", "b"]).grammar_spec()
    assert json.loads(spec.source) == ["a", "b"]


def test_text_or_nothing_asks_for_no_grammar():
    assert CompletionRequest(prompt="x", response_format={"type": "text"}).grammar_spec() is None
    assert CompletionRequest(prompt="x").grammar_spec() is None


def test_json_is_compact_unless_disable_any_whitespace_is_false():
    def spec(**options):
        body = {"json": SCHEMA, **options}
        return CompletionRequest(prompt="x", structured_outputs=body).grammar_spec()

    assert not spec().any_whitespace
    assert not spec(disable_any_whitespace=True).any_whitespace
    assert spec(disable_any_whitespace=False).any_whitespace


def test_a_reasoning_reply_starts_its_grammar_after_the_end_tag():
    config = ServerConfig(reasoning_parser="qwen3")
    thinking = plan_reply(ChatCompletionRequest(messages=USER), config)
    assert thinking.reasoning_end("<|im_start|>assistant\n<think>\n") == "</think>"
    assert thinking.reasoning_end("<|im_start|>assistant\n<think>\n\n</think>\n\n") is None
    off = ChatCompletionRequest(messages=USER, chat_template_kwargs={"enable_thinking": False})
    assert plan_reply(off, config).reasoning_end("assistant\n<think>\n") is None
    unparsed = plan_reply(ChatCompletionRequest(messages=USER), ServerConfig())
    assert unparsed.reasoning_end("assistant\n<think>\n") is None


@pytest.mark.parametrize(
    ("function", "field"),
    [
        ({"name": "get>weather"}, "tools[1].function.name"),
        (
            {"name": "f", "parameters": {"type": "object", "properties": {"a\nb": {}}}},
            "tools[1].function.parameters.properties",
        ),
    ],
)
@pytest.mark.parametrize("tool_choice", ["auto", "required"])
def test_a_name_the_call_format_cannot_carry_is_a_400_naming_it(function, field, tool_choice):
    from ignition.server.errors import ApiError

    tools = [
        {"type": "function", "function": {"name": "ok"}},
        {"type": "function", "function": function},
    ]
    body = ChatCompletionRequest(messages=USER, tools=tools, tool_choice=tool_choice)
    coder = ServerConfig(tool_call_parser="qwen3_coder", enable_auto_tool_choice=True)
    with pytest.raises(ApiError) as raised:
        plan_reply(body, coder)
    assert raised.value.status == 400 and raised.value.param == field
    assert "qwen3_coder" in str(raised.value)
    hermes = ServerConfig(tool_call_parser="hermes", enable_auto_tool_choice=True)
    assert plan_reply(body, hermes).tools is not None
