"""Issue 15's defects: bad input never costs a 500, another request, or the event loop.

Each test is named after the defect it pins down; all run against the HTTP layer
with a scripted engine (vocabulary of 64 ids, context of 64 tokens).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading

import pytest

from ignition.server.config import ServerConfig
from tests.server.scripted import ScriptedEngine, client, run


def post(path: str, payload=None, *, engine=None, config=None, content=None, headers=None):
    engine = engine or ScriptedEngine()

    async def go():
        async with client(engine, config) as c:
            if content is not None:
                return await c.post(path, content=content, headers=headers or {})
            return await c.post(path, json=payload)

    return run(go())


def assert_openai_error(r, status: int, param: str | None = None) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    if param is not None:
        assert error["param"] == param
    return error


@pytest.mark.parametrize("bad", [64, 9999999999999, 2**62])
def test_an_out_of_vocabulary_token_id_is_a_400_naming_the_id_and_the_vocabulary(bad):
    engine = ScriptedEngine()
    r = post("/v1/completions", {"prompt": [5, 6, bad]}, engine=engine)
    error = assert_openai_error(r, 400, "prompt")
    assert f"prompt[2] = {bad}" in error["message"]
    assert "64 ids" in error["message"]
    assert engine.requests == []


def test_an_out_of_vocabulary_id_in_a_list_of_prompts_names_its_prompt():
    r = post("/v1/completions", {"prompt": [[1, 2], [3, 70]]})
    assert "prompt[1][1] = 70" in assert_openai_error(r, 400, "prompt")["message"]


def test_a_body_over_max_request_bytes_is_413_before_anything_is_parsed():
    engine = ScriptedEngine()
    config = ServerConfig(max_request_bytes=1000)
    r = post("/v1/completions", {"prompt": "x" * 2000}, engine=engine, config=config)
    error = assert_openai_error(r, 413)
    assert "1000 bytes" in error["message"]
    assert engine.encoded == []


def test_a_chunked_body_over_the_cap_is_413_too():
    engine = ScriptedEngine()

    async def body():
        for _ in range(20):
            yield b" " * 100

    r = post(
        "/v1/completions",
        engine=engine,
        config=ServerConfig(max_request_bytes=1000),
        content=body(),
        headers={"content-type": "application/json"},
    )
    assert_openai_error(r, 413)
    assert engine.encoded == []


class BlockingEncoder(ScriptedEngine):
    """encode waits until /health has been answered: on the event loop it never would be."""

    def __init__(self) -> None:
        super().__init__()
        self.health_answered = threading.Event()
        self.saw_health_while_encoding = False

    def encode(self, text: str) -> list[int]:
        self.saw_health_while_encoding = self.health_answered.wait(timeout=10)
        return super().encode(text)


def test_tokenization_runs_off_the_event_loop_so_health_answers_meanwhile():
    engine = BlockingEncoder()

    async def go():
        async with client(engine) as c:
            completion = asyncio.ensure_future(c.post("/v1/completions", json={"prompt": "hi"}))
            await asyncio.sleep(0.05)
            health = await c.get("/health")
            engine.health_answered.set()
            return health, await completion

    health, completion = run(go())
    assert health.status_code == 200
    assert completion.status_code == 200
    assert engine.saw_health_while_encoding


@pytest.mark.parametrize(
    ("path", "payload", "param"),
    [
        ("/v1/completions", {"prompt": "a\ud800b"}, "prompt"),
        ("/v1/completions", {"prompt": ["ok", "a\udfffb"]}, "prompt"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a\ud800"}]}, None),
        ("/v1/completions", {"prompt": "x", "stop": ["\ud800"]}, "stop.0"),
    ],
)
def test_a_lone_surrogate_is_a_400_not_a_500(path, payload, param):
    raw = json.dumps(payload).encode()  # json escapes the surrogate as \ud800
    r = post(path, content=raw, headers={"content-type": "application/json"})
    error = assert_openai_error(r, 400, param)
    assert "lone surrogate" in error["message"]


def test_the_connection_keeps_working_after_a_lone_surrogate():
    async def go():
        async with client(ScriptedEngine()) as c:
            bad = json.dumps({"prompt": "a\ud800b"}).encode()
            first = await c.post(
                "/v1/completions", content=bad, headers={"content-type": "application/json"}
            )
            return first, await c.post("/v1/completions", json={"prompt": "fine"})

    first, second = run(go())
    assert first.status_code == 400 and second.status_code == 200


NULLABLE = [
    "tools",
    "tool_choice",
    "response_format",
    "logit_bias",
    "top_logprobs",
    "parallel_tool_calls",
    "logprobs",
    "stop",
    "seed",
    "temperature",
    "n",
    "stream_options",
    "max_tokens",
    "user",
]


def test_explicit_nulls_for_standard_fields_are_accepted():
    chat = {"messages": [{"role": "user", "content": "hi"}], **dict.fromkeys(NULLABLE)}
    r = post("/v1/chat/completions", chat)
    assert r.status_code == 200, r.text
    completion = {"prompt": "hi", "suffix": None, "echo": None, **dict.fromkeys(NULLABLE)}
    assert post("/v1/completions", completion).status_code == 200


def test_unknown_fields_are_ignored_with_one_log_line(caplog):
    with caplog.at_level(logging.WARNING, logger="ignition.server"):
        r = post("/v1/completions", {"prompt": "hi", "bogus": 1, "zz_other": {"a": 1}})
    assert r.status_code == 200
    lines = [rec.getMessage() for rec in caplog.records if "unknown fields" in rec.getMessage()]
    assert len(lines) == 1
    assert "'bogus'" in lines[0] and "'zz_other'" in lines[0]


def test_an_unknown_model_is_a_404_with_an_openai_error():
    r = post("/v1/completions", {"prompt": "hi", "model": "gpt-4"})
    error = assert_openai_error(r, 404, "model")
    assert error["code"] == "model_not_found"
    assert "'gpt-4'" in error["message"] and "'scripted'" in error["message"]


def test_every_served_model_name_is_accepted_and_the_first_is_reported():
    config = ServerConfig(served_model_names=("primary", "alias"))
    engine = ScriptedEngine()
    r = post("/v1/completions", {"prompt": "hi", "model": "alias"}, engine=engine, config=config)
    assert r.status_code == 200
    assert r.json()["model"] == "alias"
    unnamed = post("/v1/completions", {"prompt": "hi"}, engine=engine, config=config)
    assert unnamed.json()["model"] == "primary"
    served = post("/v1/completions", {"prompt": "hi", "model": "scripted"}, config=config)
    assert served.status_code == 404


def get(path: str, method: str = "GET"):
    async def go():
        async with client(ScriptedEngine()) as c:
            return await c.request(method, path)

    return run(go())


def test_an_unknown_route_is_a_404_in_the_openai_shape():
    error = assert_openai_error(get("/v1/nothing"), 404)
    assert "/v1/nothing" in error["message"]


def test_a_wrong_method_is_a_405_in_the_openai_shape():
    assert_openai_error(get("/v1/completions", "GET"), 405)


def test_malformed_json_is_a_400_without_a_character_offset_as_param():
    r = post(
        "/v1/completions", content=b'{"prompt": "x",', headers={"content-type": "application/json"}
    )
    error = assert_openai_error(r, 400)
    assert error["param"] is None
    assert "not valid JSON" in error["message"]


def test_a_full_queue_is_a_503_with_retry_after():
    r = post("/v1/completions", {"prompt": "x"}, engine=ScriptedEngine(full=True))
    assert_openai_error(r, 503)
    assert r.headers["retry-after"] == "1"


def test_the_openapi_document_lists_the_real_statuses_and_the_error_body():
    schema = get("/openapi.json").json()
    for path in ("/v1/completions", "/v1/chat/completions"):
        responses = schema["paths"][path]["post"]["responses"]
        assert {"200", "400", "404", "503"} <= set(responses)
        assert "422" not in responses
        error = responses["400"]["content"]["application/json"]["schema"]
        assert error == {"$ref": "#/components/schemas/ErrorResponse"}
        assert "Retry-After" in responses["503"]["headers"]
    assert "HTTPValidationError" not in schema["components"]["schemas"]


@pytest.mark.parametrize(
    ("payload", "param"),
    [
        ({"prompt": [False]}, "prompt"),
        ({"prompt": [1, True]}, "prompt"),
        ({"prompt": "x", "stream": "yes"}, "stream"),
        ({"prompt": "x", "max_tokens": True}, "max_tokens"),
        ({"prompt": "x", "max_tokens": "5"}, "max_tokens"),
        ({"prompt": "x", "temperature": "0.5"}, "temperature"),
    ],
)
def test_lax_coercion_is_refused(payload, param):
    assert_openai_error(post("/v1/completions", payload), 400, param)


def test_a_nan_temperature_says_it_must_be_finite():
    raw = b'{"prompt": "x", "temperature": NaN}'
    r = post("/v1/completions", content=raw, headers={"content-type": "application/json"})
    error = assert_openai_error(r, 400, "temperature")
    assert error["message"] == "temperature: must be a finite number, got NaN"


class BrokenTokenizer(ScriptedEngine):
    def encode(self, text: str) -> list[int]:
        raise RuntimeError("tokenizer state is corrupt")


def test_an_unexpected_exception_is_a_json_500_and_the_connection_stays_usable():
    engine = BrokenTokenizer()

    async def go():
        async with client(engine) as c:
            first = await c.post("/v1/completions", json={"prompt": "hi"})
            return first, await c.post("/v1/completions", json={"prompt": [1, 2]})

    first, second = run(go())
    error = assert_openai_error(first, 500)
    assert error["type"] == "server_error" and "tokenizer state is corrupt" in error["message"]
    assert second.status_code == 200


def test_a_request_holds_at_most_64_prompts():
    error = assert_openai_error(post("/v1/completions", {"prompt": ["a"] * 65}), 400, "prompt")
    assert "at most 64" in error["message"]
