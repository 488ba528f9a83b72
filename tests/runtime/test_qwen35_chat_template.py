"""Issue 11, deliverable 6: a template of the shape Qwen publishes for Qwen3.5 (tools, thinking).

The template (qwen35_shape.jinja beside this file) is written for these tests; the
tokenizer is the embedded checkpoint's byte-level BPE with the ChatML special tokens.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from ignition.runtime.chat.template import ChatRenderer, ChatTemplateError
from ignition.runtime.chat.template_files import load_chat_templates

HERE = Path(__file__).resolve().parent
ASSET = HERE.parent.parent / "ignition" / "assets" / "qwen38-tiny"
TEMPLATE = (HERE / "qwen35_shape.jinja").read_text()

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city, in °C",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
CALL = {
    "id": "call-1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": json.dumps({"city": "Zürich", "days": 2})},
}
CONVERSATION = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "Weather in Zürich?"},
    {
        "role": "assistant",
        "content": "",
        "reasoning_content": "The tool knows.",
        "tool_calls": [CALL],
    },
    {"role": "tool", "tool_call_id": "call-1", "content": "3 °C, snow"},
    {"role": "tool", "tool_call_id": "call-2", "content": "wind 20 km/h"},
]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """The embedded tokenizer with the Qwen3.5-shaped template as chat_template.jinja."""
    folder = tmp_path_factory.mktemp("qwen35")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(ASSET / name, folder / name)
    (folder / "chat_template.jinja").write_text(TEMPLATE)
    return folder


@pytest.fixture(scope="module")
def tokenizer(checkpoint) -> Tokenizer:
    return Tokenizer.from_file(str(checkpoint / "tokenizer.json"))


@pytest.fixture(scope="module")
def chat(checkpoint, tokenizer) -> ChatRenderer:
    config = json.loads((checkpoint / "tokenizer_config.json").read_text())

    def encode(texts):
        return [e.ids for e in tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    return ChatRenderer(load_chat_templates(checkpoint, config), encode)


def test_the_tools_block_lists_each_tool_as_json_in_the_system_turn(chat):
    text = chat.render_text(CONVERSATION[:2], tools=[WEATHER])
    system = text.split("<|im_end|>")[0]
    assert system.startswith("<|im_start|>system\n# Tools")
    assert "<tools>\n" + json.dumps(WEATHER, ensure_ascii=False) + "\n</tools>" in system
    assert system.endswith("Answer briefly.")


def test_without_tools_the_system_turn_is_the_system_message(chat):
    text = chat.render_text(CONVERSATION[:2])
    assert text.startswith("<|im_start|>system\nAnswer briefly.<|im_end|>\n<|im_start|>user\n")


def test_thinking_is_on_unless_the_request_turns_it_off(chat):
    on = chat.render_text(CONVERSATION[1:2])
    off = chat.render_text(CONVERSATION[1:2], template_kwargs={"enable_thinking": False})
    assert on.endswith("<|im_start|>assistant\n<think>\n")
    assert off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_tool_calls_and_grouped_tool_responses_render_in_the_qwen35_shape(chat):
    text = chat.render_text(CONVERSATION, tools=[WEATHER], add_generation_prompt=False)
    assistant = text.split("<|im_start|>assistant\n")[1]
    assert assistant.startswith("<think>\nThe tool knows.\n</think>\n\n<tool_call>\n")
    assert "<function=get_weather>\n<parameter=city>\nZürich\n</parameter>\n" in assistant
    assert "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call><|im_end|>" in assistant
    assert text.endswith(
        "<|im_start|>user\n<tool_response>\n3 °C, snow\n</tool_response>"
        "\n<tool_response>\nwind 20 km/h\n</tool_response><|im_end|>\n"
    )


def test_reasoning_before_the_last_user_query_is_dropped(chat):
    earlier = [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "<think>\nold thoughts\n</think>\n\nfirst answer"},
        {"role": "user", "content": "two"},
    ]
    text = chat.render_text(earlier)
    assert "old thoughts" not in text
    assert "<|im_start|>assistant\nfirst answer<|im_end|>" in text


def test_a_conversation_without_a_user_message_is_refused_by_the_template(chat):
    with pytest.raises(ChatTemplateError, match="needs at least one user message"):
        chat.render(CONVERSATION[:1])


def test_message_end_offsets_match_each_prefix_tokenized_alone(chat, tokenizer):
    rendered = chat.render(CONVERSATION, tools=[WEATHER])
    assert rendered.prompt_ids == tuple(
        tokenizer.encode(rendered.text, add_special_tokens=False).ids
    )
    offsets = rendered.message_end_offsets
    assert offsets[0] == 0  # a system message alone is refused by the template
    for i in (1, 2, 4):  # each ends with <|im_end|>\n: no merge crosses the boundary
        prefix = chat.render_text(
            CONVERSATION[: i + 1], tools=[WEATHER], add_generation_prompt=False
        )
        ids = tokenizer.encode(prefix, add_special_tokens=False).ids
        assert offsets[i] == len(ids)
        assert rendered.prompt_ids[: offsets[i]] == tuple(ids)
    # the first tool response is closed with <|im_end|> only when it is last: it ends
    # where the two renderings part, after its </tool_response>
    end = tokenizer.decode(list(rendered.prompt_ids[: offsets[3]]), skip_special_tokens=False)
    assert end.endswith("3 °C, snow\n</tool_response>")
    assert list(offsets) == sorted(offsets)


def with_argument_objects(messages):
    """transformers expects tool-call arguments as an object; OpenAI clients send a string."""
    out = json.loads(json.dumps(messages))
    for message in out:
        for call in message.get("tool_calls", []):
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return out


def test_the_renderer_matches_transformers_apply_chat_template(checkpoint, chat):
    transformers = pytest.importorskip("transformers")
    reference = transformers.AutoTokenizer.from_pretrained(str(checkpoint))
    cases = [
        (CONVERSATION[:2], None, {}),
        (CONVERSATION, [WEATHER], {}),
        (CONVERSATION, [WEATHER], {"enable_thinking": False}),
    ]
    for messages, tools, kwargs in cases:
        ours = chat.render(messages, tools=tools, template_kwargs=kwargs)
        text = reference.apply_chat_template(
            with_argument_objects(messages),
            tools=tools,
            add_generation_prompt=True,
            tokenize=False,
            **kwargs,
        )
        ids = reference.apply_chat_template(
            with_argument_objects(messages),
            tools=tools,
            add_generation_prompt=True,
            tokenize=True,
            **kwargs,
        )
        assert ours.text == text
        assert list(ours.prompt_ids) == list(ids["input_ids"])
