"""Issue 24, defect 7: what the server cannot honour is a 400 naming it, never ignored."""

from __future__ import annotations

import pytest

from ignition.runtime.chat.template_files import ChatTemplates
from ignition.server.config import ServerConfig
from ignition.serving.server_config import template_renders_tools
from tests.server.scripted import ScriptedEngine, client, run

USER = [{"role": "user", "content": "hi"}]
TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}


def post(path: str, body: dict, config: ServerConfig | None = None, engine=None):
    engine = engine or ScriptedEngine()

    async def go():
        async with client(engine, config) as c:
            return await c.post(path, json=body)

    return run(go())


def error_of(response, param: str) -> str:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param
    return error["message"]


@pytest.mark.parametrize(
    ("field", "value", "param"),
    [
        ("guided_json", {"type": "object"}, "guided_json"),
        ("guided_regex", "[a-z]+", "guided_regex"),
        ("guided_choice", ["yes", "no"], "guided_choice"),
        ("guided_grammar", "root ::= 'a'", "guided_grammar"),
        ("structured_outputs", {"json": {"type": "object"}}, "structured_outputs.json"),
        ("response_format", {"type": "json_object"}, "response_format"),
    ],
)
@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_structured_outputs_on_an_engine_without_a_grammar_compiler_are_a_400_naming_the_field(
    path, field, value, param
):
    engine = ScriptedEngine()
    body = {"prompt": "x"} if path == "/v1/completions" else {"messages": USER}
    message = error_of(post(path, {**body, field: value}, engine=engine), param)
    assert "this server has no structured outputs" in message
    assert engine.requests == []


@pytest.mark.parametrize("field", ["structural_tag", "whitespace_pattern"])
def test_an_unserved_structured_outputs_option_is_a_400_naming_it(field):
    body = {"messages": USER, "structured_outputs": {"regex": "a+", field: "x"}}
    message = error_of(post("/v1/chat/completions", body), f"structured_outputs.{field}")
    assert f"{field} is not supported" in message


def test_two_structured_output_constraints_are_a_400():
    body = {"messages": USER, "guided_regex": "a+", "response_format": {"type": "json_object"}}
    response = post("/v1/chat/completions", body)
    assert response.status_code == 400
    assert "one structured output constraint" in response.json()["error"]["message"]


def test_structured_outputs_needs_exactly_one_constraint():
    body = {"messages": USER, "structured_outputs": {"regex": "a+", "choice": ["a"]}}
    message = error_of(post("/v1/chat/completions", body), "structured_outputs")
    assert "exactly one of" in message


def test_a_json_schema_response_format_needs_its_json_schema():
    body = {"messages": USER, "response_format": {"type": "json_schema"}}
    message = error_of(post("/v1/chat/completions", body), "response_format")
    assert "needs a json_schema object" in message


def test_a_text_response_format_is_still_accepted():
    body = {"messages": USER, "response_format": {"type": "text"}}
    assert post("/v1/chat/completions", body).status_code == 200


def test_tools_on_a_template_that_cannot_render_them_are_a_400():
    config = ServerConfig(template_renders_tools=False)
    engine = ScriptedEngine()
    response = post("/v1/chat/completions", {"messages": USER, "tools": [TOOL]}, config, engine)
    assert "does not render tool definitions" in error_of(response, "tools")
    assert engine.requests == []
    plain = {"messages": USER, "tools": [TOOL], "tool_choice": "none"}
    assert post("/v1/chat/completions", plain, config).status_code == 200


def test_a_template_renders_tools_only_if_it_reads_the_tools_variable():
    reads = ChatTemplates({"default": "{% for t in tools or [] %}{{ t }}{% endfor %}"}, "x")
    ignores = ChatTemplates({"default": "{% for m in messages %}{{ m.content }}{% endfor %}"}, "x")
    with_tool_use = ChatTemplates(
        {"default": "{{ messages }}", "tool_use": "{{ tools | tojson }}{{ messages }}"}, "x"
    )
    assert template_renders_tools(reads)
    assert not template_renders_tools(ignores)
    assert template_renders_tools(with_tool_use)
    assert not template_renders_tools(ChatTemplates.fallback())


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_an_out_of_vocabulary_stop_token_id_is_a_400_naming_the_id(path):
    body = {"prompt": "x"} if path == "/v1/completions" else {"messages": USER}
    message = error_of(post(path, {**body, "stop_token_ids": [3, 64]}), "stop_token_ids")
    assert "stop_token_ids[1] = 64" in message and "64 ids" in message


@pytest.mark.parametrize("stream", [False, None])
def test_stream_options_without_stream_is_a_400(stream):
    body = {"prompt": "x", "stream_options": {"include_usage": True}, "stream": stream}
    message = error_of(post("/v1/completions", body), "stream_options")
    assert "only allowed with stream = true" in message
