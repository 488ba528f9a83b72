"""Tool-call parsers (server/tools/): both Qwen3.x formats, streamed at any cut.

A reply parsed in one piece and the same reply cut anywhere give the same message;
the streamed deltas never carry a tag fragment as content.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ignition.server.tools import (
    ReplyParser,
    detect_tool_call_parser,
    tool_call_parser_class,
)

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "scale": {"type": "number"},
                "metric": {"type": "boolean"},
                "where": {"type": "object"},
            },
        },
    },
}
CODER = (
    "Let me check.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
    "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
)
CODER_TWO = (
    CODER
    + "\n<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n"
    + "</function>\n</tool_call>"
)
HERMES = (
    'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa\\"</tool_call>ris",'
    ' "days": 3}}\n</tool_call>'
)


def parse(name: str, pieces: list[str], tools=(WEATHER,)) -> tuple[dict, list[dict]]:
    """The non-streamed message and the streamed delta bodies of one reply."""
    reply = ReplyParser(None, tool_call_parser_class(name)(list(tools)))
    deltas = [reply.step(p, final=i == len(pieces) - 1).body() for i, p in enumerate(pieces)]
    return without_ids(reply.message()), deltas


def without_ids(message: dict) -> dict:
    for call in message.get("tool_calls", []):
        call["id"] = "id"
    return message


def cuts(text: str) -> list[list[str]]:
    return [[text[:i], text[i:]] for i in range(len(text) + 1)]


def test_qwen3_coder_reply_gives_content_and_a_call_with_typed_arguments():
    message, _ = parse("qwen3_coder", [CODER])
    assert message["content"] == "Let me check."
    (call,) = message["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris", "days": 3}


@pytest.mark.parametrize("name,text", [("qwen3_coder", CODER_TWO), ("hermes", HERMES)])
def test_every_cut_of_a_reply_parses_as_the_whole_reply(name, text):
    whole, _ = parse(name, [text])
    for pieces in cuts(text):
        assert parse(name, pieces)[0] == whole, pieces
    assert parse(name, list(text))[0] == whole


@pytest.mark.parametrize("name,text", [("qwen3_coder", CODER_TWO), ("hermes", HERMES)])
def test_no_cut_leaks_a_tag_fragment_into_streamed_content(name, text):
    for pieces in [*cuts(text), list(text)]:
        _, deltas = parse(name, pieces)
        streamed = "".join(d.get("content", "") for d in deltas)
        assert "<" not in streamed and streamed == parse(name, [text])[0]["content"]


@pytest.mark.parametrize("name,text", [("qwen3_coder", CODER_TWO), ("hermes", HERMES)])
def test_streamed_calls_name_the_function_first_then_arguments_join_to_the_message(name, text):
    message, deltas = parse(name, list(text))
    entries = [call for d in deltas for call in d.get("tool_calls", [])]
    for index, expected in enumerate(message["tool_calls"]):
        mine = [e for e in entries if e["index"] == index]
        assert mine[0]["function"]["name"] == "get_weather" and mine[0]["type"] == "function"
        assert mine[0]["id"].startswith("call_")
        assert all("name" not in e["function"] and "id" not in e for e in mine[1:])
        arguments = "".join(e["function"]["arguments"] for e in mine)
        assert arguments == expected["function"]["arguments"]
        assert len(mine) > 2  # the arguments arrive in fragments, not at the end


def test_two_calls_get_indexes_zero_and_one_and_distinct_ids():
    reply = ReplyParser(None, tool_call_parser_class("qwen3_coder")([WEATHER]))
    reply.step(CODER_TWO, final=True)
    calls = reply.message()["tool_calls"]
    assert [json.loads(c["function"]["arguments"])["city"] for c in calls] == ["Paris", "Rome"]
    assert calls[0]["id"] != calls[1]["id"]


def test_qwen3_coder_parameters_follow_their_schema_types():
    text = (
        "<tool_call>\n<function=get_weather>\n<parameter=city>\n42\n</parameter>\n"
        "<parameter=scale>\n1.5\n</parameter>\n<parameter=metric>\nTrue\n</parameter>\n"
        '<parameter=where>\n{"lat": 1}\n</parameter>\n<parameter=extra>\nx y\n</parameter>\n'
        "</function>\n</tool_call>"
    )
    (call,) = parse("qwen3_coder", [text])[0]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {
        "city": "42",
        "scale": 1.5,
        "metric": True,
        "where": {"lat": 1},
        "extra": "x y",
    }


def test_qwen3_coder_value_that_does_not_parse_as_its_type_stays_text():
    text = (
        "<tool_call>\n<function=get_weather>\n<parameter=days>\nthree\n</parameter>\n"
        "</function>\n</tool_call>"
    )
    (call,) = parse("qwen3_coder", [text])[0]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"days": "three"}


def test_qwen3_coder_a_missing_parameter_end_tag_ends_at_the_next_tag():
    text = (
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n<parameter=days>\n2\n"
        "</function>\n</tool_call>"
    )
    (call,) = parse("qwen3_coder", [text])[0]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"city": "Oslo", "days": 2}


def test_a_call_cut_off_by_the_token_limit_keeps_its_complete_parameters():
    text = "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n<para"
    (call,) = parse("qwen3_coder", [text])[0]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"city": "Oslo"}


def test_hermes_keeps_a_closing_tag_written_inside_a_string_argument():
    (call,) = parse("hermes", [HERMES])[0]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"city": 'Pa"</tool_call>ris', "days": 3}


def test_hermes_block_in_another_key_order_is_read_whole():
    text = '<tool_call>\n{"arguments": {"city": "Lima"}, "name": "get_weather"}\n</tool_call>'
    (call,) = parse("hermes", [text])[0]["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Lima"}


@pytest.mark.parametrize("name", ["hermes", "qwen3_coder"])
def test_a_block_that_is_not_a_call_is_returned_as_content(name):
    text = "use the <tool_call> tag </tool_call> like this"
    message, _ = parse(name, [text])
    assert message == {"role": "assistant", "content": text}
    assert parse(name, list(text))[0] == message


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab <>/\n_tol"), max_size=40))
def test_a_reply_without_a_call_is_content_unchanged(text):
    if "<tool_call>" in text:
        return
    for name in ("hermes", "qwen3_coder"):
        assert parse(name, list(text))[0] == {"role": "assistant", "content": text}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, len(CODER_TWO)), max_size=6))
def test_any_number_of_cuts_parses_as_the_whole_reply(points):
    bounds = [0, *sorted(points), len(CODER_TWO)]
    pieces = [CODER_TWO[a:b] for a, b in itertools.pairwise(bounds)]
    assert parse("qwen3_coder", pieces)[0] == parse("qwen3_coder", [CODER_TWO])[0]


QWEN35_SHAPE = (Path(__file__).resolve().parents[1] / "runtime" / "qwen35_shape.jinja").read_text()
HERMES_SHAPE = (
    "{% if tools %}<tools>{{ tools | tojson }}</tools> answer with <tool_call>\\n"
    '{"name": <name>, "arguments": <args>}\\n</tool_call>{% endif %}'
)


def test_the_format_is_detected_from_the_chat_template():
    assert detect_tool_call_parser([QWEN35_SHAPE]) == "qwen3_coder"
    assert detect_tool_call_parser([HERMES_SHAPE]) == "hermes"
    assert detect_tool_call_parser(["{{ messages[0].content }}"]) is None


def test_an_unknown_parser_name_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="'nope': unknown; choose one of hermes, qwen3_coder"):
        tool_call_parser_class("nope")


def test_qwen3_coder_text_value_streams_before_its_end_tag_arrives():
    reply = ReplyParser(None, tool_call_parser_class("qwen3_coder")([WEATHER]))
    opened = reply.step("<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Fr")
    assert opened.arguments == {0: '{"city": "San Fr'}
    assert reply.step('an "C"\n').arguments == {0: 'an \\"C\\"'}  # the newline waits
    closed = reply.step("\n</parameter>\n</function>\n</tool_call>", final=True)
    assert closed.arguments == {0: '\\n"}'}
    assert json.loads(reply.calls[0].arguments) == {"city": 'San Fran "C"\n'}


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab_-. <>\n\r\t="), min_size=0, max_size=6))
def test_qwen3_coder_reads_back_exactly_the_names_it_says_it_can_carry(name):
    """``name_problem`` is the format's own limit: a call of the function ``name`` with a
    parameter ``name`` reads back with both names iff no problem is reported."""
    parser = tool_call_parser_class("qwen3_coder")
    tool = {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    text = f"<tool_call>\n<function={name}>\n<parameter={name}>\nv\n</parameter>\n</function>\n</tool_call>"  # noqa: E501
    message, _ = parse("qwen3_coder", [text], tools=(tool,))
    read_back = [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in message.get("tool_calls", [])
    ]
    assert (read_back == [(name, {name: "v"})]) == (parser.name_problem(name) is None)


def test_hermes_carries_any_name():
    assert tool_call_parser_class("hermes").name_problem("a<b>\n c ") is None
