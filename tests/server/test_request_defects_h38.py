"""Issue 38's request defects, each at the HTTP door (scripted engine, no model):

- 3.3 /tokenize takes vLLM's request fields (``chat_template_kwargs``, ``tools``,
  ``add_generation_prompt``, ``add_special_tokens``) and logs no "unknown fields";
- 3.5 a chat whose messages cannot fit the context by their characters is refused before
  it is rendered or tokenized;
- 3.6 a body that is not UTF-8 is a 400 naming the byte, ``param`` "body";
- 3.8 a reply that only reasoned has ``content: null``, as in vLLM;
- 3.2 a forced tool call cut by ``max_tokens`` before any call is a reply with
  ``finish_reason: "length"``, not a 500, and a gated grammar gets its reasoning deadline.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import httpx

from ignition.runtime.chat.template import RenderedChat
from ignition.runtime.grammar import REASONING_SHARE, GrammarSpec, RequestGrammar
from ignition.server.config import ServerConfig
from tests.server.scripted import ScriptedEngine, client, run

USER = [{"role": "user", "content": "hi"}]
TOKENIZER = Path(__file__).resolve().parents[2] / "ignition/assets/qwen38-tiny/tokenizer.json"
THINKING = ServerConfig(tool_call_parser="qwen3_coder", reasoning_parser="qwen3")
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
NAMED = {"type": "function", "function": {"name": "get_weather"}}


class RecordingEngine(ScriptedEngine):
    """Records the render options and encode calls; a BOS id 63 marks special tokens;
    compiles grammars to stubs."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.options: list[dict] = []
        self.special: list[bool] = []
        self.max_context_tokens = 4096

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        self.special.append(add_special_tokens)
        return ([63] if add_special_tokens else []) + super().encode(text)

    def render_chat(self, messages, **options) -> RenderedChat:
        self.options.append(options)
        rendered = super().render_chat(messages)
        return RenderedChat(rendered.text, tuple(super().encode(rendered.text)), ())

    def compile_grammar(self, spec: GrammarSpec) -> RequestGrammar:
        return RequestGrammar(spec, None, ())


def post(path: str, body=None, *, engine=None, config=None, content=None):
    engine = engine or RecordingEngine()

    async def go():
        async with client(engine, config) as c:
            if content is not None:
                headers = {"content-type": "application/json"}
                return await c.post(path, content=content, headers=headers)
            return await c.post(path, json=body)

    return run(go())


def test_a_body_that_is_not_utf8_is_a_400_naming_the_first_bad_byte():
    r = post("/v1/completions", content=b'{"prompt": "\xffx"}')
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["param"] == "body"
    assert error["message"].startswith("the request body is not valid UTF-8 JSON")
    assert "at byte 12" in error["message"]


def test_chat_tokenize_renders_with_the_requests_template_fields():
    engine = RecordingEngine()
    body = {
        "messages": USER,
        "chat_template_kwargs": {"enable_thinking": False},
        "add_generation_prompt": False,
        "tools": [WEATHER],
    }
    r = post("/tokenize", body, engine=engine)
    assert r.status_code == 200, r.text
    (options,) = engine.options
    assert options["template_kwargs"] == {"enable_thinking": False}
    assert options["add_generation_prompt"] is False
    assert [t["function"]["name"] for t in options["tools"]] == ["get_weather"]


def test_tokenize_add_special_tokens_is_off_for_chat_and_on_for_a_prompt_by_default():
    engine = RecordingEngine()
    plain_chat = post("/tokenize", {"messages": USER}, engine=engine).json()["tokens"]
    chat = post("/tokenize", {"messages": USER, "add_special_tokens": True}, engine=engine)
    assert chat.json()["tokens"] == [63, *plain_chat]
    prompt = post("/tokenize", {"prompt": "abc"}, engine=engine).json()["tokens"]
    bare = post("/tokenize", {"prompt": "abc", "add_special_tokens": False}, engine=engine)
    assert prompt == [63, *bare.json()["tokens"]]


def test_tokenize_logs_no_unknown_fields_for_either_kind_of_body(caplog):
    with caplog.at_level(logging.WARNING, logger="ignition.server"):
        assert post("/tokenize", {"prompt": "abc"}).status_code == 200
        assert post("/tokenize", {"messages": USER}).status_code == 200
    assert not [r for r in caplog.records if "unknown fields" in r.getMessage()]


def test_a_tokenize_field_this_server_does_not_serve_is_a_400_naming_it():
    r = post("/tokenize", {"messages": USER, "chat_template": "{{ 1 }}"})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "chat_template"


def test_a_chat_longer_than_the_context_by_characters_is_refused_before_rendering():
    engine = RecordingEngine()
    config = ServerConfig(max_chars_per_token=4)  # 4095 x 4 characters at most
    messages = [
        {"role": "system", "content": "s" * 10_000},
        {"role": "user", "content": "u" * 7_000},
    ]
    r = post("/v1/chat/completions", {"messages": messages}, engine=engine, config=config)
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["param"] == "messages"
    assert "17000 characters" in error["message"] and "16380" in error["message"]
    assert engine.rendered == [] and engine.encoded == []


def test_assistant_turns_do_not_count_toward_the_chat_character_bound():
    engine = RecordingEngine()
    config = ServerConfig(max_chars_per_token=4)
    messages = [{"role": "assistant", "content": "a" * 20_000}, {"role": "user", "content": "u"}]
    post("/v1/chat/completions", {"messages": messages}, engine=engine, config=config)
    assert engine.rendered  # a template may drop them: the rendered tokens decide


def test_a_reply_that_only_reasoned_has_null_content_streamed_or_not():
    config = ServerConfig(reasoning_parser="qwen3")
    reply = post(
        "/v1/chat/completions",
        {"messages": USER},
        engine=RecordingEngine(pieces=["still ", "thinking"], opening="<think>\n"),
        config=config,
    )
    message = reply.json()["choices"][0]["message"]
    assert message["content"] is None and message["reasoning_content"] == "still thinking"
    streamed = post(
        "/v1/chat/completions",
        {"messages": USER, "stream": True},
        engine=RecordingEngine(pieces=["still ", "thinking"], opening="<think>\n"),
        config=config,
    )
    events = [json.loads(line[6:]) for line in streamed.text.splitlines() if line[6:7] == "{"]
    deltas = [e["choices"][0]["delta"] for e in events]
    assert all("content" not in d for d in deltas)
    assert "".join(d.get("reasoning_content", "") for d in deltas) == "still thinking"


def forced(stream: bool, max_tokens: int) -> httpx.Response:
    engine = RecordingEngine(pieces=["thinking ", "on ", "and ", "on"], opening="<think>\n")
    body = {"messages": USER, "tools": [WEATHER], "tool_choice": NAMED, "stream": stream}
    return post("/v1/chat/completions", {**body, "max_tokens": max_tokens}, engine=engine,
                config=THINKING)  # fmt: skip


def test_a_forced_call_cut_by_max_tokens_before_any_call_finishes_with_length_not_500():
    r = forced(stream=False, max_tokens=3)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "length"
    assert "tool_calls" not in choice["message"] and choice["message"]["content"] is None


def test_a_streamed_forced_call_cut_before_any_call_ends_with_length_not_an_error():
    text = forced(stream=True, max_tokens=3).text
    assert '"error"' not in text
    assert '"finish_reason": "length"' in text and text.rstrip().endswith("data: [DONE]")


def test_a_grammar_after_reasoning_must_close_it_within_its_share_of_max_tokens():
    engine = RecordingEngine(pieces=["x"], opening="<think>\n")
    schema = {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}}
    for body in (
        {"tools": [WEATHER], "tool_choice": NAMED},
        {"response_format": schema},
    ):
        r = post("/v1/chat/completions", {"messages": USER, "max_tokens": 40, **body},
                 engine=engine, config=THINKING)  # fmt: skip
        assert r.status_code == 200, r.text
        grammar = engine.requests[-1].sampling.grammar
        assert grammar.gate == tuple(engine.encode("</think>", add_special_tokens=False))
        assert grammar.gate_deadline == int(40 * REASONING_SHARE)


def test_the_serving_encoder_adds_the_tokenizers_special_tokens_only_when_asked():
    from tokenizers import Tokenizer, processors

    from ignition.serving.app import gil_releasing_encoder

    tokenizer = Tokenizer.from_file(str(TOKENIZER))
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<|endoftext|> $A", special_tokens=[("<|endoftext|>", 0)]
    )
    plain = gil_releasing_encoder(tokenizer, add_special_tokens=False)("</think>")
    assert gil_releasing_encoder(tokenizer)("</think>") == [0, *plain]


def test_tokenize_with_tools_on_a_template_that_never_renders_them_is_a_400_as_chat_is():
    config = ServerConfig(template_renders_tools=False)
    r = post("/tokenize", {"messages": USER, "tools": [WEATHER]}, config=config)
    assert r.status_code == 400 and r.json()["error"]["param"] == "tools"
