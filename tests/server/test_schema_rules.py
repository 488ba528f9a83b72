"""Issue 24, defect 8: the OpenAPI document and the validators agree on cross-field rules.

Each body below is judged twice: by the schema the server publishes at /openapi.json
(with a JSON Schema validator) and by the server itself (a 400 or not). The two
verdicts must be equal; the first three rows are the requests the issue reproduced.
"""

from __future__ import annotations

import jsonschema_rs
import pytest

from tests.server.scripted import ScriptedEngine, client, run

SYSTEM_NULL = [
    {"role": "system", "content": None, "tool_calls": []},
    {"role": "user", "content": "x"},
]
USER = [{"role": "user", "content": "x"}]
CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}

CASES = [
    ("/v1/completions", "CompletionRequest", {"prompt": "x", "best_of": 1, "n": 15}, False),
    ("/v1/chat/completions", "ChatCompletionRequest", {"messages": SYSTEM_NULL}, False),
    ("/tokenize", "TokenizeChatRequest", {"messages": SYSTEM_NULL}, False),
    ("/v1/completions", "CompletionRequest", {"prompt": "x", "best_of": 3, "n": 2}, True),
    ("/v1/completions", "CompletionRequest", {"prompt": "x", "n": 2, "best_of": None}, True),
    (
        "/v1/completions",
        "CompletionRequest",
        {"prompt": "x", "best_of": 3, "n": 2, "stream": True},
        False,
    ),
    ("/v1/completions", "CompletionRequest", {"prompt": "x", "best_of": 2, "stream": True}, False),
    (
        "/v1/completions",
        "CompletionRequest",
        {"prompt": "x", "best_of": 2, "n": 2, "stream": True},
        False,
    ),
    ("/v1/completions", "CompletionRequest", {"prompt": "x", "best_of": 1, "stream": True}, True),
    ("/v1/completions", "CompletionRequest", {"prompt": "x", "n": 3, "stream": True}, True),
    (
        "/v1/completions",
        "CompletionRequest",
        {"prompt": "x", "prompt_logprobs": 1, "stream": True},
        False,
    ),
    (
        "/v1/chat/completions",
        "ChatCompletionRequest",
        {"messages": [{"role": "assistant", "content": None, "tool_calls": [CALL]}]},
        True,
    ),
    (
        "/v1/chat/completions",
        "ChatCompletionRequest",
        {"messages": [{"role": "assistant", "tool_calls": []}]},
        False,
    ),
    (
        "/v1/chat/completions",
        "ChatCompletionRequest",
        {"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2},
        False,
    ),
    (
        "/v1/chat/completions",
        "ChatCompletionRequest",
        {"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2, "logprobs": True},
        True,
    ),
    ("/v1/completions", "CompletionRequest", {"prompt": "x", "stream_options": {}}, False),
    (
        "/v1/completions",
        "CompletionRequest",
        {"prompt": "x", "stream": True, "stream_options": {"include_usage": True}},
        True,
    ),
    ("/v1/completions", "CompletionRequest", {"prompt": "x", "guided_json": 5}, False),
    (
        "/v1/chat/completions",
        "ChatCompletionRequest",
        {"messages": USER, "response_format": {"type": "text", "json_schema": {"name": "x"}}},
        False,
    ),
    (
        "/v1/chat/completions",
        "ChatCompletionRequest",
        {"messages": USER, "response_format": {"type": "json_schema"}},
        False,
    ),
    (
        "/v1/chat/completions",
        "ChatCompletionRequest",
        {"messages": USER, "response_format": {"type": "text", "json_schema": None}},
        True,
    ),
    ("/v1/completions", "CompletionRequest", {"prompt": "x", "stop_token_ids": [64]}, False),
]


def verdicts(path: str, component: str, body: dict) -> tuple[bool, bool]:
    async def go():
        async with client(ScriptedEngine()) as c:
            document = (await c.get("/openapi.json")).json()
            return document, await c.post(path, json=body)

    document, response = run(go())
    schema = {**document, "$ref": f"#/components/schemas/{component}"}
    by_schema = jsonschema_rs.Draft202012Validator(schema).is_valid(body)
    return by_schema, response.status_code != 400


@pytest.mark.parametrize(("path", "component", "body", "valid"), CASES)
def test_the_schema_accepts_exactly_what_the_validators_accept(path, component, body, valid):
    by_schema, by_server = verdicts(path, component, body)
    assert by_server == valid
    assert by_schema == by_server


@pytest.mark.parametrize("component", ["CompletionRequest", "ChatCompletionRequest"])
def test_schemathesis_can_generate_from_the_rules(component):
    """The rules stay within what schema-driven generators canonicalise (not "raw")."""

    async def go():
        async with client(ScriptedEngine()) as c:
            return (await c.get("/openapi.json")).json()

    schema = {**run(go()), "$ref": f"#/components/schemas/{component}"}
    canonical = jsonschema_rs.canonicalize(schema, draft=jsonschema_rs.Draft202012)
    assert canonical.kind is not jsonschema_rs.canonical.CanonicalKind.RAW
