"""Structured outputs over HTTP with the official ``openai`` client (issue 24, part 3).

A real server over the tiny random checkpoint, with speculation off, fixed and adaptive
(conftest.grammar_server, shared with test_forced_tool_calls_http.py): ``response_format``
json_schema and json_object, vLLM's ``structured_outputs`` and ``guided_*`` fields, on
chat and completions, streamed and not. The random model
writes nonsense unless its grammar mask holds it to the format, so every output that
parses, matches or validates is the mask's doing.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor

import jsonschema_rs
import openai
import pytest

from tests.runtime.structured import CHOICES, REGEX, SCHEMA

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
JSON_SCHEMA = {"type": "json_schema", "json_schema": {"name": "item", "schema": SCHEMA}}
USER = [{"role": "user", "content": "Describe one item as JSON."}]
SAMPLING = [{"temperature": 0}, {"temperature": 1, "seed": 3}]


@pytest.fixture
def client(grammar_server) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{grammar_server}/v1", api_key="-", max_retries=0, timeout=120)


def chat(client, max_tokens=80, **kwargs):
    return client.chat.completions.create(model="x", messages=USER, max_tokens=max_tokens, **kwargs)


def complete(client, prompt="x =", max_tokens=40, **kwargs):
    return client.completions.create(model="x", prompt=prompt, max_tokens=max_tokens, **kwargs)


def validates(text: str) -> bool:
    return jsonschema_rs.validator_for(SCHEMA).is_valid(json.loads(text))


@pytest.mark.parametrize("sampling", SAMPLING)
def test_a_json_schema_chat_reply_parses_and_validates(client, sampling):
    reply = chat(client, response_format=JSON_SCHEMA, **sampling).choices[0]
    assert reply.finish_reason == "stop"
    assert validates(reply.message.content)


@pytest.mark.parametrize("sampling", SAMPLING)
def test_a_streamed_json_schema_chat_reply_parses_and_validates(client, sampling):
    stream = chat(client, response_format=JSON_SCHEMA, stream=True, **sampling)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert validates(text)


def test_a_json_object_reply_parses_as_an_object(client):
    reply = chat(client, response_format={"type": "json_object"}, temperature=1, seed=5)
    assert isinstance(json.loads(reply.choices[0].message.content), dict)


@pytest.mark.parametrize("sampling", SAMPLING)
def test_a_structured_outputs_regex_completion_fullmatches(client, sampling):
    body = {"structured_outputs": {"regex": REGEX}}
    text = complete(client, extra_body=body, **sampling).choices[0].text
    assert re.fullmatch(REGEX, text)


def test_a_streamed_guided_regex_completion_fullmatches(client):
    stream = complete(client, stream=True, temperature=0, extra_body={"guided_regex": REGEX})
    assert re.fullmatch(REGEX, "".join(c.choices[0].text for c in stream))


@pytest.mark.parametrize("field", ["guided_choice", "structured_outputs"])
def test_a_choice_completion_is_one_of_the_choices(client, field):
    body = {field: CHOICES} if field == "guided_choice" else {field: {"choice": CHOICES}}
    reply = complete(client, temperature=1, seed=2, extra_body=body)
    assert reply.choices[0].text in CHOICES


def test_a_guided_json_completion_validates(client):
    reply = complete(client, max_tokens=80, temperature=0, extra_body={"guided_json": SCHEMA})
    assert validates(reply.choices[0].text)


def test_an_invalid_schema_is_a_400_naming_response_format_json_schema(client):
    bad = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nope"}}}
    with pytest.raises(openai.BadRequestError) as caught:
        chat(client, response_format=bad)
    assert caught.value.body["param"] == "response_format.json_schema"
    assert "nope" in caught.value.body["message"]


def test_a_bad_regex_is_a_400_naming_structured_outputs_regex(client):
    with pytest.raises(openai.BadRequestError) as caught:
        complete(client, extra_body={"structured_outputs": {"regex": "a(b"}})
    assert caught.value.body["param"] == "structured_outputs.regex"


def test_constrained_and_unconstrained_requests_together_are_both_correct(client):
    def free():
        return complete(client, prompt="def f(", temperature=0, extra_body={"ignore_eos": True})

    alone = free().choices[0].text
    with ThreadPoolExecutor(4) as pool:
        structured = [
            pool.submit(chat, client, response_format=JSON_SCHEMA, temperature=1, seed=s)
            for s in range(3)
        ]
        beside = pool.submit(free)
        for future in structured:
            assert validates(future.result().choices[0].message.content)
        assert beside.result().choices[0].text == alone
