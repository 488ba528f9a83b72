"""tool_choice "required" and named, enforced by a grammar, on a real server (issue 24).

The official ``openai`` client against the tiny random checkpoint, with speculation off,
fixed and adaptive (conftest.grammar_server, shared with the structured-output tests);
the bundle's chat template renders the qwen3_coder format. The random model never
writes a call by itself, so every reply that parses into valid calls is the grammar's
doing: without it a forced call ends with no `tool_calls`. It spells a
call in about 70 tokens, so "required" runs with ``parallel_tool_calls: false`` (one call
of either tool) to end within its budget; that several calls parse is
test_tool_grammar.py's.
"""

from __future__ import annotations

import openai
import pytest

from tests.server.forced_calls import RAIN, TOOLS, valid_call

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
USER = [{"role": "user", "content": "Will it rain this week?"}]
NAMED = {"type": "function", "function": {"name": "ring"}}
BROKEN = {
    "type": "function",
    "function": {
        "name": "broken",
        "parameters": {"type": "object", "properties": {"x": {"type": "nope"}}},
    },
}


@pytest.fixture
def client(grammar_server) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{grammar_server}/v1", api_key="-", max_retries=0, timeout=120)


def calls_of(client, stream: bool, **fields) -> tuple[list[tuple[str, str]], str]:
    """[(name, arguments)] and the finish reason, streamed deltas joined as a client does."""
    response = client.chat.completions.create(
        model="x", messages=USER, tools=TOOLS, max_tokens=120, stream=stream, **fields
    )
    if not stream:
        choice = response.choices[0]
        calls = [(c.function.name, c.function.arguments) for c in choice.message.tool_calls or []]
        return calls, choice.finish_reason
    joined: dict[int, list[str]] = {}
    finish = ""
    for chunk in response:
        for delta in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
            if delta.index not in joined:
                joined[delta.index] = [delta.function.name, ""]
            joined[delta.index][1] += delta.function.arguments or ""
        if chunk.choices and chunk.choices[0].finish_reason:
            finish = chunk.choices[0].finish_reason
    return [(name, arguments) for name, arguments in joined.values()], finish


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_required_replies_with_a_call_of_a_declared_tool_whose_arguments_validate(client, stream):
    calls, finish = calls_of(
        client, stream, tool_choice="required", parallel_tool_calls=False, temperature=1, seed=4
    )
    assert finish == "tool_calls"
    assert len(calls) == 1 and valid_call(*calls[0])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_named_function_replies_with_exactly_one_valid_call_of_it(client, stream):
    calls, finish = calls_of(client, stream, tool_choice=NAMED, temperature=0)
    assert finish == "tool_calls"
    assert [name for name, _ in calls] == ["ring"]
    assert valid_call(*calls[0])


def test_a_tool_whose_schema_the_grammar_compiler_rejects_is_a_400_naming_it(client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="x", messages=USER, tools=[RAIN, BROKEN], tool_choice="required"
        )
    assert caught.value.body["param"] == "tools[1].function.parameters"
    assert "'broken'" in caught.value.body["message"]
    assert "nope" in caught.value.body["message"]
