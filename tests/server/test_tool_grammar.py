"""The grammar of a forced tool call agrees with the format's parser (server/tools/grammar.py).

Random walks through each compiled grammar (a uniformly drawn allowed token at every
step, over the test checkpoint's tokenizer) stand for any model: every reply the grammar
admits must parse into calls of declared functions whose arguments follow their schemas.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from ignition.model.grammar_mask import mask_words
from ignition.runtime.grammar import GrammarError, GrammarState
from ignition.server.tools import ReplyParser, tool_call_parser_class
from ignition.server.tools.grammar import forced_call_spec, tool_error
from tests.runtime.structured import MODEL_VOCAB, compiler, tokenizer
from tests.runtime.tiny import EOS
from tests.server.forced_calls import RAIN, RING, TOOLS, valid_call

FORMATS = ["qwen3_coder", "hermes"]
WALKS = 12


def walk(spec, seed: int, max_steps: int = 3000) -> str:
    """A reply drawn uniformly from the allowed tokens (the end, where allowed, half the
    time), decoded; it must end within ``max_steps``."""
    state = GrammarState(compiler().compile(spec))
    draw = random.Random(seed)
    table = torch.zeros(1, mask_words(MODEL_VOCAB), dtype=torch.int32)
    ids: list[int] = []
    for _ in range(max_steps):
        state.fill(table, 0)
        bits = np.unpackbits(table[0].numpy().view(np.uint8), bitorder="little")
        allowed = bits[:MODEL_VOCAB].nonzero()[0].tolist()
        token = EOS if EOS in allowed and draw.random() < 0.5 else draw.choice(allowed)
        if token == EOS:
            return tokenizer().decode(ids)
        assert state.accept(token)
        ids.append(token)
    raise AssertionError(f"no end within {max_steps} tokens: {tokenizer().decode(ids)!r}")


def parse(name: str, text: str) -> ReplyParser:
    reply = ReplyParser(None, tool_call_parser_class(name)(TOOLS), forced=True)
    reply.step(text, final=True)
    return reply


@pytest.mark.parametrize("name", FORMATS)
def test_every_reply_a_required_grammar_admits_is_calls_of_declared_tools_with_valid_arguments(
    name,
):
    spec = forced_call_spec(tool_call_parser_class(name), TOOLS, None)
    counts = set()
    for seed in range(WALKS):
        reply = parse(name, walk(spec, seed))
        assert reply.failure is None and reply.content == ""
        assert reply.calls and all(valid_call(c.name, c.arguments) for c in reply.calls)
        counts.add(len(reply.calls))
    assert max(counts) > 1  # one or more calls


@pytest.mark.parametrize("name", FORMATS)
def test_a_named_grammar_admits_exactly_one_call_of_that_function(name):
    spec = forced_call_spec(tool_call_parser_class(name), TOOLS, "ring")
    for seed in range(WALKS):
        reply = parse(name, walk(spec, seed))
        assert [c.name for c in reply.calls] == ["ring"]
        assert valid_call("ring", reply.calls[0].arguments)


def test_required_with_parallel_tool_calls_false_admits_exactly_one_call():
    spec = forced_call_spec(tool_call_parser_class("qwen3_coder"), TOOLS, None, single_call=True)
    for seed in range(WALKS):
        assert len(parse("qwen3_coder", walk(spec, seed)).calls) == 1


CALLS = {
    "qwen3_coder": "<tool_call>\n<function={}>\n<parameter=d>\n{}\n</parameter>\n"
    "</function>\n</tool_call>",
    "hermes": '<tool_call>\n{{"name": "{}", "arguments": {{"d": {}}}}}\n</tool_call>',
}


def accepts(spec, text: str) -> bool:
    state = GrammarState(compiler().compile(spec))
    return all(state.accept(t) for t in tokenizer().encode(text).ids) and state.accept(EOS)


@pytest.mark.parametrize("name", FORMATS)
def test_the_call_a_chat_template_shows_is_admitted_and_an_undeclared_or_out_of_range_one_is_not(
    name,
):
    spec = forced_call_spec(tool_call_parser_class(name), TOOLS, None)
    assert accepts(spec, CALLS[name].format("rain", 3))
    assert not accepts(spec, CALLS[name].format("rain", 9))  # maximum 7
    assert not accepts(spec, CALLS[name].format("launch", 3))
    assert not accepts(spec, "Sure." + CALLS[name].format("rain", 3))


BAD = {
    "type": "function",
    "function": {
        "name": "broken",
        "parameters": {"type": "object", "properties": {"x": {"type": "nope"}}},
    },
}


def test_a_schema_the_compiler_rejects_is_reported_with_its_tool_and_field():
    tools = [RAIN, BAD]
    parser = tool_call_parser_class("qwen3_coder")
    with pytest.raises(GrammarError) as caught:
        compiler().compile(forced_call_spec(parser, tools, None))
    err = tool_error(compiler().compile, parser, tools, caught.value)
    assert err.param == "tools[1].function.parameters"
    assert "'broken'" in str(err) and "nope" in str(err)


def test_a_tool_that_is_not_strict_constrains_only_the_calls_shape():
    loose = {**BAD, "function": {**BAD["function"], "strict": False}}
    spec = forced_call_spec(tool_call_parser_class("hermes"), [RING, loose], "broken")
    assert accepts(spec, '<tool_call>\n{"name": "broken", "arguments": {"y": [1]}}\n</tool_call>')


def test_after_reasoning_a_call_may_follow_the_blank_line_models_write_after_think():
    parser = tool_call_parser_class("qwen3_coder")
    call = CALLS["qwen3_coder"].format("rain", 3)
    assert accepts(forced_call_spec(parser, TOOLS, None, after_reasoning=True), "\n\n" + call)
    assert not accepts(forced_call_spec(parser, TOOLS, None), "\n\n" + call)
