"""The qwen3 reasoning parser: ``<think>`` becomes reasoning_content, at any cut.

Reasoning is split before tool calls are looked for, so only calls after ``</think>``
are calls.
"""

from __future__ import annotations

import json

import pytest

from ignition.server.tools import (
    ReplyParser,
    opens_reasoning,
    reasoning_parser_class,
    tool_call_parser_class,
)

QWEN3 = reasoning_parser_class("qwen3")
CALL = "<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>"
TOOL = {"type": "function", "function": {"name": "f", "parameters": {}}}


def parse(pieces: list[str], in_reasoning=False, thinking=True, tools=False):
    calls = tool_call_parser_class("qwen3_coder")([TOOL]) if tools else None
    reply = ReplyParser(QWEN3(in_reasoning, thinking), calls)
    deltas = [reply.step(p, final=i == len(pieces) - 1).body() for i, p in enumerate(pieces)]
    message = reply.message()
    for call in message.get("tool_calls", []):
        call["id"] = "id"
    return message, deltas


def cuts(text: str) -> list[list[str]]:
    return [[text[:i], text[i:]] for i in range(len(text) + 1)] + [list(text)]


def test_a_reply_that_starts_inside_reasoning_splits_at_the_end_tag():
    message, _ = parse(["Let me think.\n</think>\n\nIt is 4."], in_reasoning=True)
    assert message["reasoning_content"] == "Let me think."
    assert message["content"] == "It is 4."


def test_a_reasoning_block_the_model_opens_itself_is_split():
    message, _ = parse(["<think>\nhmm\n</think>\n\nYes."])
    assert (message["reasoning_content"], message["content"]) == ("hmm", "Yes.")


def test_a_reply_without_reasoning_has_null_reasoning_content():
    message, _ = parse(["Just an answer."])
    assert message == {"role": "assistant", "content": "Just an answer.", "reasoning_content": None}


def test_reasoning_cut_off_by_the_token_limit_is_all_reasoning():
    message, _ = parse(["still thinking about <tool_call> and"], in_reasoning=True)
    assert message["reasoning_content"] == "still thinking about <tool_call> and"
    assert message["content"] is None  # vLLM: null content beside reasoning only


@pytest.mark.parametrize(
    "text,in_reasoning",
    [("<think>\nab\n</think>\n\ncd", False), ("ab</think>\n\ncd", True)],
)
def test_every_cut_splits_the_same_and_no_tag_is_streamed(text, in_reasoning):
    whole, _ = parse([text], in_reasoning)
    for pieces in cuts(text):
        message, deltas = parse(pieces, in_reasoning)
        assert message == whole
        streamed = [d.get("content", "") + d.get("reasoning_content", "") for d in deltas]
        assert "<" not in "".join(streamed), pieces


def test_with_thinking_off_an_empty_think_block_is_removed():
    text = "<think>\n\n</think>\n\nHello."
    for pieces in cuts(text):
        message, _ = parse(pieces, thinking=False)
        assert (message["content"], message["reasoning_content"]) == ("Hello.", None)


def test_with_thinking_off_no_split_is_attempted():
    text = "<think>\nideas\n</think>\nHello."
    message, _ = parse([text], in_reasoning=True, thinking=False)
    assert (message["content"], message["reasoning_content"]) == (text, None)


def test_a_tool_call_inside_reasoning_is_reasoning_and_one_after_it_is_a_call():
    text = f"maybe {CALL} later</think>\n\n{CALL}"
    whole, _ = parse([text], in_reasoning=True, tools=True)
    assert whole["reasoning_content"] == f"maybe {CALL} later"
    assert whole["content"] is None
    (call,) = whole["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"x": "1"}
    for pieces in cuts(text):
        assert parse(pieces, in_reasoning=True, tools=True)[0] == whole


def test_the_prompt_tells_whether_the_reply_starts_inside_reasoning():
    assert opens_reasoning("<|im_start|>assistant\n<think>\n")
    assert not opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert not opens_reasoning("<|im_start|>assistant\n")
