"""Issue 11, deliverable 6, over HTTP: template fields reach the renderer, errors are 400s.

The engine is a stand-in that renders with the real ChatRenderer and records what
it was asked; tokens are characters so a prompt reads back as its text.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from ignition.runtime.chat.template import ChatRenderer
from ignition.runtime.chat.template_files import ChatTemplates
from ignition.runtime.grammar import RequestGrammar
from ignition.runtime.loop.stats import EngineStats
from ignition.runtime.requests.generation_config import GenerationDefaults
from ignition.runtime.requests.request import GenerationRequest, StreamChunk
from ignition.server.app import create_app
from ignition.server.config import ServerConfig

QWEN35_SHAPE = (Path(__file__).resolve().parents[1] / "runtime" / "qwen35_shape.jinja").read_text()
TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
ASK = [{"role": "user", "content": "hi"}]


class RenderingEngine:
    model_name = "rendering"
    max_context_tokens = 4096
    default_max_tokens = 8
    vocab_size = None

    def __init__(
        self, template: str, defaults: GenerationDefaults | None = None, reply: str = "ok"
    ) -> None:
        self.reply = reply
        self.stats = EngineStats()
        self.generation_defaults = defaults or GenerationDefaults()
        self.requests: list[GenerationRequest] = []
        self._chat = ChatRenderer(
            ChatTemplates({"default": template}, "chat_template.jinja"),
            lambda texts: [[ord(c) for c in text] for text in texts],
        )

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def render_chat(self, messages, **options):
        return self._chat.render(messages, **options)

    def is_healthy(self) -> bool:
        return True

    def generate(self, request: GenerationRequest):
        self.requests.append(request)
        return self._stream(request)

    async def _stream(self, request: GenerationRequest):
        yield StreamChunk(self.reply, (1,), len(request.prompt_ids), 1, "stop")

    def prompt(self, index: int = -1) -> str:
        return "".join(chr(t) for t in self.requests[index].prompt_ids)


def post(
    engine: RenderingEngine, path: str, payload: dict, config: ServerConfig | None = None
) -> httpx.Response:
    async def go():
        transport = httpx.ASGITransport(app=create_app(engine, config))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.post(path, json=payload)

    return asyncio.run(go())


def chat(engine: RenderingEngine, config: ServerConfig | None = None, **fields) -> httpx.Response:
    return post(engine, "/v1/chat/completions", {"messages": ASK, **fields}, config)


AUTO_TOOLS = ServerConfig(tool_call_parser="qwen3_coder", enable_auto_tool_choice=True)


def test_chat_template_kwargs_reach_the_template():
    engine = RenderingEngine(QWEN35_SHAPE)
    response = chat(engine, chat_template_kwargs={"enable_thinking": False})
    assert response.status_code == 200, response.text
    assert engine.prompt().endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_tools_and_tool_choice_auto_put_the_tools_block_in_the_prompt():
    engine = RenderingEngine(QWEN35_SHAPE)
    response = chat(engine, AUTO_TOOLS, tools=[TOOL], tool_choice="auto")
    assert response.status_code == 200, response.text
    assert '<tools>\n{"type": "function", "function": {"name": "lookup"' in engine.prompt()


def test_tool_choice_none_leaves_the_tools_out_of_the_prompt():
    engine = RenderingEngine(QWEN35_SHAPE)
    assert chat(engine, tools=[TOOL], tool_choice="none").status_code == 200
    assert "<tools>" not in engine.prompt()


def test_a_required_call_leaves_the_prompt_as_the_template_renders_it():
    """The call is enforced by a grammar (server/tools/grammar.py), not by prefilled text."""
    engine = RenderingEngine(QWEN35_SHAPE, reply="<tool_call>\n<function=lookup>\n</function>")
    engine.compile_grammar = lambda spec: RequestGrammar(spec, None, ())
    config = ServerConfig(tool_call_parser="qwen3_coder")
    response = chat(engine, config, tools=[TOOL], tool_choice="required", max_tokens=1)
    assert engine.prompt().endswith("<|im_start|>assistant\n<think>\n")
    assert response.status_code == 200, response.text
    assert engine.requests[-1].sampling.grammar.spec.field == "tool_choice"
    choice = response.json()["choices"][0]
    assert choice["message"]["tool_calls"][0]["function"]["name"] == "lookup"


def test_a_tool_call_turn_may_omit_content_and_its_tool_response_follows():
    engine = RenderingEngine(QWEN35_SHAPE)
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    messages = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "found"},
    ]
    payload = {"messages": messages, "tools": [TOOL]}
    response = post(engine, "/v1/chat/completions", payload, AUTO_TOOLS)
    assert response.status_code == 200, response.text
    assert "<function=lookup>\n</function>" in engine.prompt()
    assert "<tool_response>\nfound\n</tool_response>" in engine.prompt()


def test_a_user_message_without_content_is_a_400():
    engine = RenderingEngine(QWEN35_SHAPE)
    response = post(engine, "/v1/chat/completions", {"messages": [{"role": "user"}]})
    assert response.status_code == 400
    assert "content is required" in response.json()["error"]["message"]


def test_raise_exception_in_the_template_is_a_400_and_the_next_request_is_served():
    engine = RenderingEngine(QWEN35_SHAPE)
    refused = post(
        engine, "/v1/chat/completions", {"messages": [{"role": "system", "content": "s"}]}
    )
    assert refused.status_code == 400
    body = refused.json()["error"]
    assert body["message"] == (
        "chat template rejected the request: The conversation needs at least one user message."
    )
    assert body["type"] == "invalid_request_error"
    assert chat(engine).status_code == 200


def test_a_template_with_a_syntax_error_fails_chat_with_a_400_while_completions_serve():
    engine = RenderingEngine("{% for m in messages %}{{ m.content }}")
    response = chat(engine)
    assert response.status_code == 400
    assert (
        "chat_template.jinja: chat template 'default' line 1: syntax error"
        in (response.json()["error"]["message"])
    )
    assert post(engine, "/v1/completions", {"prompt": "hi"}).status_code == 200


def test_an_undefined_call_in_the_template_is_a_400():
    response = chat(RenderingEngine("{{ missing_helper(messages) }}"))
    assert response.status_code == 400
    assert "undefined" in response.json()["error"]["message"]


def test_generation_defaults_fill_the_sampling_fields_a_request_omits():
    engine = RenderingEngine(QWEN35_SHAPE, GenerationDefaults(0.6, 0.95, 20))
    assert chat(engine).status_code == 200
    assert post(engine, "/v1/completions", {"prompt": "hi", "top_k": 3}).status_code == 200
    first, second = (r.sampling for r in engine.requests)
    assert (first.temperature, first.top_p, first.top_k) == (0.6, 0.95, 20)
    assert (second.temperature, second.top_p, second.top_k) == (0.6, 0.95, 3)


def test_add_generation_prompt_false_renders_without_the_assistant_opening():
    engine = RenderingEngine(QWEN35_SHAPE)
    assert chat(engine, add_generation_prompt=False).status_code == 200
    assert engine.prompt() == "<|im_start|>user\nhi<|im_end|>\n"


def test_reasoning_of_a_template_that_opens_think_in_the_prompt_is_split():
    engine = RenderingEngine(QWEN35_SHAPE, reply="Greet back.\n</think>\n\nHello!")
    response = chat(engine, ServerConfig(reasoning_parser="qwen3"))
    assert engine.prompt().endswith("<|im_start|>assistant\n<think>\n")
    message = response.json()["choices"][0]["message"]
    assert (message["reasoning_content"], message["content"]) == ("Greet back.", "Hello!")


def test_with_thinking_off_the_template_closes_think_and_the_reply_is_content():
    engine = RenderingEngine(QWEN35_SHAPE, reply="Hello!")
    config = ServerConfig(reasoning_parser="qwen3")
    response = chat(engine, config, chat_template_kwargs={"enable_thinking": False})
    message = response.json()["choices"][0]["message"]
    assert (message["reasoning_content"], message["content"]) == (None, "Hello!")
