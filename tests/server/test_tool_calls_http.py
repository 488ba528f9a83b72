"""Tool calls and reasoning over HTTP, with the official ``openai`` client.

The scripted engine replies with exact text pieces (the tiny model would not write
tool calls), one chunk each; the app parses them with the configured formats. It
records the grammar a forced call is given and does not apply it (the grammar itself:
test_tool_grammar.py; enforced on a real server: test_forced_tool_calls_http.py).
"""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest

from ignition.runtime.grammar import GrammarError, GrammarSpec, RequestGrammar
from ignition.server.app import create_app
from ignition.server.config import ServerConfig
from tests.server.scripted import ScriptedEngine

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {}}}
ASK = [{"role": "user", "content": "weather in Paris?"}]
CODER_CALL = [
    "Checking.",
    "\n\n<tool",
    "_call>\n<function=get_",
    "weather>\n<parameter=city>\nPar",
    "is\n</parameter>\n</function>\n</tool_call>",
]
AUTO = ServerConfig(tool_call_parser="qwen3_coder", enable_auto_tool_choice=True)
THINKING = ServerConfig(
    tool_call_parser="qwen3_coder", enable_auto_tool_choice=True, reasoning_parser="qwen3"
)


class GrammarRecordingEngine(ScriptedEngine):
    """Compiles nothing: keeps each grammar spec and hands back a stub grammar."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.grammars: list[GrammarSpec] = []

    def compile_grammar(self, spec: GrammarSpec) -> RequestGrammar:
        self.grammars.append(spec)
        return RequestGrammar(spec, None, ())

    def forced_format(self) -> dict:
        """The structural tag's format of the last forced call's grammar."""
        (spec,) = self.grammars
        assert (spec.kind, spec.field) == ("structural_tag", "tool_choice")
        assert self.requests[-1].sampling.grammar.spec is spec
        return json.loads(spec.source)["format"]


def scripted(pieces: list[str], opening: str = "") -> GrammarRecordingEngine:
    engine = GrammarRecordingEngine(pieces=pieces, opening=opening)
    engine.max_context_tokens = 4096
    return engine


def ask(engine: ScriptedEngine, config: ServerConfig, stream: bool = False, **fields):
    """The openai client's response (a list of chunks when streamed)."""

    async def go():
        transport = httpx.ASGITransport(app=create_app(engine, config))
        http = httpx.AsyncClient(transport=transport, base_url="http://test")
        async with openai.AsyncOpenAI(
            base_url="http://test/v1", api_key="unused", http_client=http, max_retries=0
        ) as client:
            fields.setdefault("messages", ASK)
            response = await client.chat.completions.create(
                model="scripted", stream=stream, max_tokens=32, **fields
            )
            if not stream:
                return response
            return [chunk async for chunk in response]

    return asyncio.run(go())


def streamed_calls(chunks) -> dict[int, dict]:
    """Tool-call deltas joined per index, as a client does; also checks the name comes first."""
    calls: dict[int, dict] = {}
    for chunk in chunks:
        for call in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
            if call.index not in calls:
                assert call.id and call.function.name, "the first delta names the call"
                calls[call.index] = {"id": call.id, "name": call.function.name, "arguments": ""}
            else:
                assert call.id is None and call.function.name is None
            calls[call.index]["arguments"] += call.function.arguments or ""
    return calls


def text_of(chunks, field: str) -> str:
    return "".join(getattr(c.choices[0].delta, field, None) or "" for c in chunks if c.choices)


def test_auto_tool_call_is_returned_as_tool_calls_with_finish_reason_tool_calls():
    reply = ask(scripted(CODER_CALL), AUTO, tools=[WEATHER])
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Checking."
    (call,) = choice.message.tool_calls
    assert call.id.startswith("call_") and call.type == "function"
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}


def test_auto_tool_call_streams_the_name_first_then_arguments_and_no_tag_as_content():
    chunks = ask(scripted(CODER_CALL), AUTO, stream=True, tools=[WEATHER])
    (call,) = streamed_calls(chunks).values()
    assert call["name"] == "get_weather"
    assert json.loads(call["arguments"]) == {"city": "Paris"}
    assert text_of(chunks, "content") == "Checking."
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_auto_without_enable_auto_tool_choice_is_a_400_naming_the_flag():
    with pytest.raises(openai.BadRequestError) as info:
        ask(scripted(CODER_CALL), ServerConfig(tool_call_parser="qwen3_coder"), tools=[WEATHER])
    assert "--enable-auto-tool-choice" in info.value.body["message"]


def test_tool_choice_none_parses_nothing():
    reply = ask(scripted(CODER_CALL), AUTO, tools=[WEATHER], tool_choice="none")
    assert reply.choices[0].message.content == "".join(CODER_CALL)
    assert reply.choices[0].message.tool_calls is None
    assert reply.choices[0].finish_reason == "stop"


NAMED = {"type": "function", "function": {"name": "get_weather"}}
OSLO_CALL = [
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n",
    "</parameter>\n</function>\n</tool_call>",
]


def test_a_named_function_is_one_call_of_it_under_a_grammar_and_nothing_is_prefilled():
    engine = scripted(OSLO_CALL)
    reply = ask(engine, AUTO, tools=[WEATHER, TIME], tool_choice=NAMED)
    assert engine.rendered[-1].endswith("<assistant>")
    tag = engine.forced_format()
    assert tag["type"] == "tag" and tag["begin"] == "<tool_call>\n<function=get_weather>\n"
    assert tag["content"]["json_schema"] == WEATHER["function"]["parameters"]
    (call,) = reply.choices[0].message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == (
        "get_weather",
        {"city": "Oslo"},
    )


def test_a_named_function_streams_its_name_first_then_its_arguments():
    engine = scripted(OSLO_CALL)
    chunks = ask(engine, AUTO, stream=True, tools=[WEATHER, TIME], tool_choice=NAMED)
    first = next(c for c in chunks if c.choices and c.choices[0].delta.tool_calls)
    assert first.choices[0].delta.tool_calls[0].function.name == "get_weather"
    (call,) = streamed_calls(chunks).values()
    assert json.loads(call["arguments"]) == {"city": "Oslo"}


def test_required_is_one_or_more_calls_of_any_declared_tool_under_a_grammar():
    engine = scripted(["<tool_call>\n<function=get_time>\n</function>\n</tool_call>"])
    config = ServerConfig(tool_call_parser="qwen3_coder")
    reply = ask(engine, config, tools=[WEATHER, TIME], tool_choice="required")
    calls = engine.forced_format()
    assert (calls["type"], calls["at_least_one"], calls["stop_after_first"]) == (
        "tags_with_separator",
        True,
        False,
    )
    assert [t["begin"] for t in calls["tags"]] == [
        "<tool_call>\n<function=get_weather>\n",
        "<tool_call>\n<function=get_time>\n",
    ]
    (call,) = reply.choices[0].message.tool_calls
    assert (call.function.name, call.function.arguments) == ("get_time", "{}")
    assert reply.choices[0].finish_reason == "tool_calls"


def test_required_with_parallel_tool_calls_false_is_exactly_one_call():
    engine = scripted(["<tool_call>\n<function=get_time>\n</function>\n</tool_call>"])
    config = ServerConfig(tool_call_parser="qwen3_coder")
    fields = {"tools": [WEATHER, TIME], "parallel_tool_calls": False}
    ask(engine, config, tool_choice="required", **fields)
    assert engine.forced_format()["stop_after_first"] is True


def test_required_reply_that_calls_an_undeclared_function_is_an_error():
    engine = scripted(["<tool_call>\n<function=launch>\n</function>\n</tool_call>"])
    config = ServerConfig(tool_call_parser="qwen3_coder")
    with pytest.raises(openai.InternalServerError) as info:
        ask(engine, config, tools=[WEATHER, TIME], tool_choice="required")
    assert "'launch', a function no tool declares" in info.value.body["message"]


def test_required_reply_that_calls_an_undeclared_function_ends_the_stream_with_an_error():
    engine = scripted(["<tool_call>\n<function=launch>\n</function>\n</tool_call>"])
    config = ServerConfig(tool_call_parser="qwen3_coder")
    with pytest.raises(openai.APIError) as info:
        ask(engine, config, stream=True, tools=[WEATHER, TIME], tool_choice="required")
    assert "'launch'" in str(info.value)


def test_required_hermes_calls_are_json_in_tool_call_under_a_json_masked_grammar():
    engine = scripted(['<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'])
    config = ServerConfig(tool_call_parser="hermes")
    reply = ask(engine, config, tools=[WEATHER, TIME], tool_choice="required")
    assert engine.grammars[0].json_values
    begins = [t["begin"] for t in engine.forced_format()["tags"]]
    assert begins[1] == '<tool_call>\n{"name": "get_time", "arguments": '
    assert reply.choices[0].message.tool_calls[0].function.name == "get_time"


def test_a_forced_call_with_a_response_format_is_a_400_naming_both():
    with pytest.raises(openai.BadRequestError) as info:
        ask(
            scripted(["x"]),
            AUTO,
            tools=[WEATHER],
            tool_choice="required",
            response_format={"type": "json_object"},
        )
    assert info.value.body["param"] == "tool_choice"
    assert "cannot be combined with response_format" in info.value.body["message"]


def test_a_forced_call_on_a_server_without_grammars_is_a_400_saying_so():
    engine = scripted(["x"])

    def no_grammars(spec: GrammarSpec) -> RequestGrammar:
        raise GrammarError(f"{spec.field}: this server has no structured outputs", spec.field)

    engine.compile_grammar = no_grammars
    with pytest.raises(openai.BadRequestError) as info:
        ask(engine, AUTO, tools=[WEATHER, TIME], tool_choice="required")
    assert info.value.body["param"] == "tool_choice"
    assert "no structured outputs" in info.value.body["message"]


def test_a_named_function_no_tool_declares_is_a_400():
    named = {"type": "function", "function": {"name": "launch"}}
    with pytest.raises(openai.BadRequestError) as info:
        ask(scripted(["x"]), AUTO, tools=[WEATHER], tool_choice=named)
    assert "'launch', which no tool declares" in info.value.body["message"]


def test_required_without_tools_is_a_400():
    with pytest.raises(openai.BadRequestError) as info:
        ask(scripted(["x"]), AUTO, tool_choice="required")
    assert "needs tools" in info.value.body["message"]


def test_a_forced_call_without_a_known_format_is_a_400_naming_the_flag():
    with pytest.raises(openai.BadRequestError) as info:
        ask(scripted(["x"]), ServerConfig(), tools=[WEATHER], tool_choice="required")
    assert "--tool-call-parser" in info.value.body["message"]


REASONING = ["Paris is in", " France.\n</th", "ink>\n\nIt is sunny."]


def test_reasoning_is_split_into_reasoning_content():
    reply = ask(scripted(REASONING, opening="<think>\n"), THINKING)
    message = reply.choices[0].message
    assert message.reasoning_content == "Paris is in France."
    assert message.content == "It is sunny."


def test_reasoning_streams_as_delta_reasoning_content_without_tags():
    chunks = ask(scripted(REASONING, opening="<think>\n"), THINKING, stream=True)
    assert text_of(chunks, "reasoning_content") == "Paris is in France."
    assert text_of(chunks, "content") == "It is sunny."


def test_enable_thinking_false_leaves_the_reply_unsplit():
    reply = ask(
        scripted(["<think>\n\n</think>\n\n", "Sunny."]),
        THINKING,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )
    assert (reply.choices[0].message.content, reply.choices[0].message.reasoning_content) == (
        "Sunny.",
        None,
    )


def test_reasoning_then_a_tool_call_gives_both_streamed_and_not():
    pieces = ["I should call <tool_call> it.", "</think>\n\n", *CODER_CALL[1:]]
    reply = ask(scripted(pieces, opening="<think>\n"), THINKING, tools=[WEATHER])
    message = reply.choices[0].message
    assert message.reasoning_content == "I should call <tool_call> it."
    assert message.content is None
    assert message.tool_calls[0].function.name == "get_weather"
    chunks = ask(scripted(pieces, opening="<think>\n"), THINKING, stream=True, tools=[WEATHER])
    assert text_of(chunks, "reasoning_content") == message.reasoning_content
    assert text_of(chunks, "content") == ""
    (call,) = streamed_calls(chunks).values()
    assert call["arguments"] == message.tool_calls[0].function.arguments


def test_a_forced_call_after_an_open_think_block_is_enforced_after_the_reasoning():
    pieces = [
        "Time it is.",
        "</think>\n\n",
        "<tool_call>\n<function=get_time>\n</function>\n</tool_call>",
    ]
    engine = scripted(pieces, opening="<think>\n")
    named = {"type": "function", "function": {"name": "get_time"}}
    reply = ask(engine, THINKING, tools=[WEATHER, TIME], tool_choice=named)
    assert engine.rendered[-1].endswith("<assistant><think>\n")
    assert engine.requests[-1].sampling.grammar.gate == tuple(engine.encode("</think>"))
    blank, call = engine.forced_format()["elements"]  # the blank line after </think>, a call
    assert (blank["pattern"], call["begin"]) == ("\\n{0,2}", "<tool_call>\n<function=get_time>\n")
    assert reply.choices[0].message.reasoning_content == "Time it is."
    assert reply.choices[0].message.tool_calls[0].function.name == "get_time"


TWO_CALLS = [*CODER_CALL, "\n<tool_call>\n<function=get_time>\n</function>\n</tool_call>"]


def test_parallel_tool_calls_false_returns_only_the_first_call_streamed_and_not():
    fields = {"tools": [WEATHER, TIME], "parallel_tool_calls": False}
    reply = ask(scripted(TWO_CALLS), AUTO, **fields)
    assert [c.function.name for c in reply.choices[0].message.tool_calls] == ["get_weather"]
    chunks = ask(scripted(TWO_CALLS), AUTO, stream=True, **fields)
    assert [c["name"] for c in streamed_calls(chunks).values()] == ["get_weather"]
    both = ask(scripted(TWO_CALLS), AUTO, tools=[WEATHER, TIME])
    assert [c.function.name for c in both.choices[0].message.tool_calls] == [
        "get_weather",
        "get_time",
    ]


def test_each_of_n_choices_parses_its_own_reply():
    reply = ask(scripted(CODER_CALL), AUTO, tools=[WEATHER], n=2)
    calls = [c.message.tool_calls for c in sorted(reply.choices, key=lambda c: c.index)]
    assert [len(c) for c in calls] == [1, 1] and calls[0][0].id != calls[1][0].id
